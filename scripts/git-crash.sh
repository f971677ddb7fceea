#!/usr/bin/env bash
# A `git commit` loop on a tierwise mount whose daemon is killed -9 at a random moment, TRIALS
# times (default 50), rotating over the policy families; after the same mount command brings
# the mount back, `git fsck --full` must pass, `.git/index` must be there and `git status` must
# work. git is asked to fsync what it writes (core.fsync=all), as a careful user would.
# Usage: ./scripts/git-crash.sh [TRIALS]   (root, /dev/fuse; TIERWISE_GIT_TRIALS also sets it;
# TIERWISE_BIN=path runs another build)
set -euo pipefail
cd "$(dirname "$0")/.."
trials=${1:-${TIERWISE_GIT_TRIALS:-50}}
cargo build --profile "${TIERWISE_PROFILE:-ci}" --locked --quiet -p tierwise
# TIERWISE_BIN: another build (a baseline in the same run); the dead mount is detached here
# too, since builds before issue 34 did not detach it themselves.
tw=${TIERWISE_BIN:-$PWD/target/${TIERWISE_PROFILE:-ci}/tierwise}
policies=(on-demand-caching dynamic-hot-dst:sieve=0 file-write-back:sieve=0 hycache)
broken=0
for t in $(seq 1 "$trials"); do
  policy=${policies[$((t % 4))]}
  work=$(mktemp -d)
  mkdir -p "$work/root/ssd" "$work/root/hdd" "$work/mnt"
  $tw mount "$work/root" "$work/mnt" --policy "$policy" --ssd-quota 256KiB --pin-reserve 32KiB >/dev/null
  pid=$($tw stats --json "$work/mnt" | python3 -c 'import json,sys; print(json.load(sys.stdin)["pid"])')
  # The repository is made before the clock starts: a kill inside `git init` is git's own
  # half-made directory, not what the file system kept.
  (
    cd "$work/mnt" && git init -q repo && cd repo
    git config user.email t@example.invalid && git config user.name t && git config core.fsync all
  ) >/dev/null
  sync "$work/mnt/repo/.git/config"
  (
    cd "$work/mnt/repo"
    i=0
    while :; do
      i=$((i + 1))
      head -c $((1000 + i * 37 % 20000)) /dev/urandom > "f$((i % 7))"
      git add -A && git commit -qm "commit $i" || exit 0
    done
  ) >/dev/null 2>&1 &
  loop=$!
  sleep "0.$((RANDOM % 9 + 1))"
  kill -9 "$pid"
  wait "$loop" 2>/dev/null || true
  # The same mount command again (it detaches the dead mount itself).
  if [ -n "${TIERWISE_BIN:-}" ]; then umount -l "$work/mnt" 2>/dev/null || true; fi
  $tw mount "$work/root" "$work/mnt" --policy "$policy" --ssd-quota 256KiB --pin-reserve 32KiB >/dev/null
  why=""
  fsck=$(cd "$work/mnt/repo" && git fsck --full 2>&1) || why="$why; git fsck: $(echo "$fsck" | head -3 | tr '\n' ' ')"
  commits=$(cd "$work/mnt/repo" && git rev-list --count HEAD 2>/dev/null || echo 0)
  # The index exists once anything was added; before the first commit a kill may precede it.
  if [ "$commits" -gt 0 ] && [ ! -f "$work/mnt/repo/.git/index" ]; then why="$why; .git/index is gone"; fi
  status=$(cd "$work/mnt/repo" && git status 2>&1) || why="$why; git status: $(echo "$status" | head -3 | tr '\n' ' ')"
  if [ -n "$why" ]; then
    broken=$((broken + 1))
    echo "trial $t ($policy): BROKEN repository after $commits commits${why}"
    ls -la "$work/mnt/repo/.git" | head -30
  fi
  $tw umount "$work/mnt" >/dev/null 2>&1 || umount -l "$work/mnt" 2>/dev/null || true
  rm -rf "$work"
done
echo "git commit loop, kill -9: $trials trials, $broken broken repositories"
[ "$broken" = 0 ]
