//! Allocation-free field splitting and number parsing for the text readers. None of these
//! panic; each returns `None` on anything it does not understand, and the reader turns that into
//! an error naming the field.

/// Trims ASCII spaces and tabs at both ends.
#[inline]
pub fn trim(s: &[u8]) -> &[u8] {
    let start = s.iter().position(|&b| b != b' ' && b != b'\t').unwrap_or(s.len());
    let end = s.iter().rposition(|&b| b != b' ' && b != b'\t').map_or(start, |e| e + 1);
    &s[start..end.max(start)]
}

/// Fields separated by one delimiter byte (CSV without quoting; trace CSVs do not quote).
pub struct Split<'a> {
    rest: Option<&'a [u8]>,
    delim: u8,
}

impl<'a> Split<'a> {
    /// Splits `s` on `delim`.
    #[inline]
    pub fn new(s: &'a [u8], delim: u8) -> Split<'a> {
        Split { rest: Some(s), delim }
    }
}

impl<'a> Iterator for Split<'a> {
    type Item = &'a [u8];
    #[inline]
    fn next(&mut self) -> Option<&'a [u8]> {
        let rest = self.rest?;
        match memchr::memchr(self.delim, rest) {
            Some(i) => {
                self.rest = Some(&rest[i + 1..]);
                Some(&rest[..i])
            }
            None => {
                self.rest = None;
                Some(rest)
            }
        }
    }
}

/// Fields separated by runs of spaces or tabs.
pub struct Words<'a> {
    rest: &'a [u8],
}

impl<'a> Words<'a> {
    /// Splits `s` on whitespace runs.
    #[inline]
    pub fn new(s: &'a [u8]) -> Words<'a> {
        Words { rest: s }
    }
}

impl<'a> Iterator for Words<'a> {
    type Item = &'a [u8];
    #[inline]
    fn next(&mut self) -> Option<&'a [u8]> {
        let s = self.rest;
        let start = s.iter().position(|&b| b != b' ' && b != b'\t')?;
        let end = s[start..].iter().position(|&b| b == b' ' || b == b'\t').map_or(s.len(), |e| start + e);
        self.rest = &s[end..];
        Some(&s[start..end])
    }
}

/// A non-negative decimal integer (surrounding spaces allowed).
#[inline]
pub fn u64_dec(s: &[u8]) -> Option<u64> {
    let s = trim(s);
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    let mut v: u64 = 0;
    for &b in s {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(d))?;
    }
    Some(v)
}

/// A signed decimal integer.
pub fn i64_dec(s: &[u8]) -> Option<i64> {
    let s = trim(s);
    match s.first() {
        Some(b'-') => u64_dec(&s[1..]).and_then(|v| 0i64.checked_sub_unsigned(v)),
        Some(b'+') => u64_dec(&s[1..]).and_then(|v| i64::try_from(v).ok()),
        _ => u64_dec(s).and_then(|v| i64::try_from(v).ok()),
    }
}

/// A hexadecimal integer, with or without `0x`.
pub fn u64_hex(s: &[u8]) -> Option<u64> {
    let s = trim(s);
    let s = s.strip_prefix(b"0x").or_else(|| s.strip_prefix(b"0X")).unwrap_or(s);
    if s.is_empty() || s.len() > 16 {
        return None;
    }
    let mut v: u64 = 0;
    for &b in s {
        let d = match b {
            b'0'..=b'9' => b - b'0',
            b'a'..=b'f' => b - b'a' + 10,
            b'A'..=b'F' => b - b'A' + 10,
            _ => return None,
        };
        v = (v << 4) | u64::from(d);
    }
    Some(v)
}

/// A non-negative decimal number of `unit_ns`-nanosecond units (e.g. seconds with
/// `unit_ns = 1e9`) converted exactly to nanoseconds when written without an exponent;
/// `1.5e3` style falls back to floating point.
pub fn decimal_to_ns(s: &[u8], unit_ns: u64) -> Option<u64> {
    let s = trim(s);
    if s.is_empty() {
        return None;
    }
    if s.iter().any(|&b| b == b'e' || b == b'E') {
        let v: f64 = std::str::from_utf8(s).ok()?.parse().ok()?;
        let ns = v * unit_ns as f64;
        return (ns.is_finite() && ns >= 0.0 && ns < u64::MAX as f64).then_some(ns as u64);
    }
    let (int, frac) = match memchr::memchr(b'.', s) {
        Some(i) => (&s[..i], &s[i + 1..]),
        None => (s, &s[..0]),
    };
    let int_v = if int.is_empty() { 0 } else { u64_dec(int)? };
    let mut ns = int_v.checked_mul(unit_ns)?;
    // Fractional digits beyond the unit's resolution are dropped.
    let mut scale = unit_ns;
    for &b in frac {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        scale /= 10;
        if scale == 0 {
            continue;
        }
        ns = ns.checked_add(u64::from(d) * scale)?;
    }
    Some(ns)
}

/// Case-insensitive equality with an ASCII word.
#[inline]
pub fn eq_ignore_case(s: &[u8], word: &str) -> bool {
    s.eq_ignore_ascii_case(word.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitting() {
        let v: Vec<_> = Split::new(b"a,,b,", b',').collect();
        assert_eq!(v, vec![&b"a"[..], b"", b"b", b""]);
        let w: Vec<_> = Words::new(b"  8,0   3  1 0.5 ").collect();
        assert_eq!(w, vec![&b"8,0"[..], b"3", b"1", b"0.5"]);
        assert_eq!(Words::new(b"   ").next(), None);
    }

    #[test]
    fn numbers() {
        assert_eq!(u64_dec(b" 42 "), Some(42));
        assert_eq!(u64_dec(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(u64_dec(b"18446744073709551616"), None);
        assert_eq!(u64_dec(b"-1"), None);
        assert_eq!(u64_dec(b""), None);
        assert_eq!(i64_dec(b"-5"), Some(-5));
        assert_eq!(u64_hex(b"2a"), Some(42));
        assert_eq!(u64_hex(b"0x2A"), Some(42));
        assert_eq!(u64_hex(b"g"), None);
        assert_eq!(decimal_to_ns(b"1456095145.133076000", 1_000_000_000), Some(1_456_095_145_133_076_000));
        assert_eq!(decimal_to_ns(b".5", 1_000_000_000), Some(500_000_000));
        assert_eq!(decimal_to_ns(b"2", 1_000), Some(2_000));
        assert_eq!(decimal_to_ns(b"1e-3", 1_000_000_000), Some(1_000_000));
        assert_eq!(decimal_to_ns(b"1.2.3", 1), None);
        assert_eq!(decimal_to_ns(b"abc", 1), None);
    }
}
