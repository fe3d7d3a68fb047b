//! Timestamps, identifiers and URL query decoding, kept dependency-free.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Formats a time as RFC 3339 in UTC with second precision, the format
/// Kubernetes uses for `metav1.Time` (e.g. `2024-05-01T12:00:00Z`).
pub fn rfc3339(time: SystemTime) -> String {
    let secs = match time.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_secs() as i64,
        Err(e) => -(e.duration().as_secs() as i64),
    };
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// The current time in Kubernetes' timestamp format.
pub fn now_rfc3339() -> String {
    rfc3339(SystemTime::now())
}

/// A timestamp `age` in the past, for making objects look old
/// (e.g. as `metadata.creationTimestamp` before [`crate::ApiServer::create`]).
pub fn timestamp_ago(age: Duration) -> String {
    rfc3339(SystemTime::now() - age)
}

/// Howard Hinnant's days-to-civil algorithm: proleptic Gregorian date of a
/// day count since 1970-01-01.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// A random 64-bit value. `RandomState` is seeded from the OS per instance,
/// which is plenty for test identifiers and avoids a `rand` dependency; the
/// counter makes successive values differ even with an equal seed.
fn random_u64() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    hasher.finish()
}

/// A version-4-shaped UUID, like the ones the real server assigns.
pub fn new_uid() -> String {
    let (a, b) = (random_u64(), random_u64());
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xfff,
        0x8000 | (b >> 48) & 0x3fff,
        b & 0xffff_ffff_ffff
    )
}

/// The random suffix `metadata.generateName` gets: five characters from the
/// same vowel-free alphabet the real server uses.
pub fn name_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut n = random_u64();
    (0..5)
        .map(|_| {
            let c = ALPHABET[(n % ALPHABET.len() as u64) as usize] as char;
            n /= ALPHABET.len() as u64;
            c
        })
        .collect()
}

/// Decodes an `application/x-www-form-urlencoded` query string into pairs,
/// keeping order and duplicates as sent.
pub fn parse_query(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|part| !part.is_empty())
        .map(|part| {
            let (k, v) = part.split_once('=').unwrap_or((part, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

/// Percent-decodes a query component, turning `+` into a space as forms do
/// (label selectors such as `env in (a,b)` arrive that way).
pub fn percent_decode(s: &str) -> String {
    decode(s, true)
}

/// Percent-decodes a URL path, where `+` is literal.
pub fn percent_decode_path(s: &str) -> String {
    decode(s, false)
}

fn decode(s: &str, plus_is_space: bool) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' if plus_is_space => out.push(b' '),
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(hi), Some(lo)) => {
                    out.push(hi << 4 | lo);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_dates() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        let t = UNIX_EPOCH + Duration::from_secs(1_709_210_096);
        assert_eq!(rfc3339(t), "2024-02-29T12:34:56Z");
    }

    #[test]
    fn uids_are_unique_and_uuid_shaped() {
        let (a, b) = (new_uid(), new_uid());
        assert_ne!(a, b);
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "4");
    }

    #[test]
    fn decodes_queries() {
        assert_eq!(
            parse_query("labelSelector=env+in+%28a%2Cb%29&limit=2&x"),
            vec![
                ("labelSelector".into(), "env in (a,b)".into()),
                ("limit".into(), "2".into()),
                ("x".into(), "".into())
            ]
        );
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz"), "%zz");
        assert_eq!(
            percent_decode_path("/a+b/system%3Areader"),
            "/a+b/system:reader"
        );
    }
}
