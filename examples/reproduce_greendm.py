"""GreenDM's Web-search figure (IOPS against the promotion threshold) in ten lines."""
from pathlib import Path
import tierwise

def run(scale: float = 1.0, out: str = "out/greendm") -> tierwise.Reproduction:
    r = tierwise.reproduce("greendm", scale=scale, out=out, traces=Path(__file__).parents[1] / "data/traces")
    print(r.findings[["claim", "paper", "ours", "held"]].to_string(index=False))  # held / not held
    web = r.runs[r.runs.workload.str.startswith("Web")]  # one row per simulation
    print(web.pivot_table(index="label", values="iops").round(0))  # the figure's bars
    return r

if __name__ == "__main__":
    run(scale=0.25)
