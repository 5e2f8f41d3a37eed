//! When to send a request again: 429 and 5xx (and a lost connection or a
//! timeout), with exponential backoff and full jitter, honouring the
//! provider's `Retry-After`, bounded in count and in total time.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How a client retries a request that failed in a way that may pass.
///
/// Retried: HTTP 429, any 5xx, a timeout, a failed or dropped connection.
/// Not retried: any other status (a 4xx says the request itself is wrong)
/// and a 2xx whose body is not a reply.
///
/// Before retry *n* (1-based) the client waits what the provider asked in
/// `Retry-After` (seconds or an HTTP date) or `retry-after-ms`, else a
/// random time in `[0, min(max_delay, base_delay · 2ⁿ⁻¹)]` ("full jitter",
/// so many clients that failed together do not come back together). It
/// gives up when `attempts` requests have been sent, or when the next wait
/// would take the time since the first request past `budget`; the error
/// then says how many requests were sent and, if the provider asked for a
/// longer wait, how long.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retry {
    /// Requests to send at most, the first included (1: never retry).
    pub attempts: u32,
    /// The backoff's first ceiling.
    pub base_delay: Duration,
    /// The backoff's largest ceiling.
    pub max_delay: Duration,
    /// Total time from the first request after which no retry starts.
    pub budget: Duration,
}

impl Default for Retry {
    /// 4 requests at most, backoff ceilings 0.5 s, 1 s, 2 s … up to 20 s,
    /// within 60 s.
    fn default() -> Retry {
        Retry {
            attempts: 4,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(20),
            budget: Duration::from_secs(60),
        }
    }
}

impl Retry {
    /// Send each request once.
    pub fn never() -> Retry {
        Retry {
            attempts: 1,
            ..Retry::default()
        }
    }

    /// The backoff ceiling before retry `n` (1-based).
    pub fn ceiling(&self, n: u32) -> Duration {
        let factor = 1u32.checked_shl(n.saturating_sub(1)).unwrap_or(u32::MAX);
        self.base_delay
            .checked_mul(factor)
            .unwrap_or(self.max_delay)
            .min(self.max_delay)
    }
}

/// How a client waits between attempts; [`std::thread::sleep`] unless a
/// test gives another (one that records the waits, say).
pub type Sleep = Arc<dyn Fn(Duration) + Send + Sync>;

/// The real sleep.
pub fn thread_sleep() -> Sleep {
    Arc::new(std::thread::sleep)
}

/// A small random source for jitter (xorshift, seeded by the standard
/// library's per-process random hasher keys): jitter needs spread, not
/// secrecy.
#[derive(Debug)]
#[cfg_attr(not(any(feature = "openai", feature = "anthropic")), allow(dead_code))]
pub(crate) struct Jitter(u64);

#[cfg_attr(not(any(feature = "openai", feature = "anthropic")), allow(dead_code))]
impl Jitter {
    pub(crate) fn new() -> Jitter {
        let seed = RandomState::new().hash_one(SystemTime::now());
        Jitter(seed | 1)
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A random duration in `[0, ceiling]`.
    pub(crate) fn upto(&mut self, ceiling: Duration) -> Duration {
        let nanos = u64::try_from(ceiling.as_nanos()).unwrap_or(u64::MAX);
        if nanos == 0 {
            return Duration::ZERO;
        }
        Duration::from_nanos(self.next() % (nanos.saturating_add(1)).max(1))
    }
}

/// The wait a provider asks for: `retry-after-ms` (milliseconds, sent by
/// OpenAI), else `Retry-After` as seconds or as an HTTP date (relative to
/// `now`; a date in the past asks for no wait).
pub fn retry_after(ms: Option<&str>, header: Option<&str>, now: SystemTime) -> Option<Duration> {
    if let Some(ms) = ms.and_then(|v| v.trim().parse::<f64>().ok()) {
        if ms.is_finite() && ms >= 0.0 {
            return Some(Duration::from_secs_f64(ms / 1000.0));
        }
    }
    let v = header?.trim();
    if let Ok(secs) = v.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = http_date(v)?;
    let now = now.duration_since(UNIX_EPOCH).ok()?.as_secs();
    Some(Duration::from_secs(at.saturating_sub(now)))
}

/// Seconds since the Unix epoch of an IMF-fixdate
/// (`Sun, 06 Nov 1994 08:49:37 GMT`), the date form HTTP servers send.
fn http_date(v: &str) -> Option<u64> {
    let rest = v.split_once(", ")?.1;
    let parts: Vec<&str> = rest.split(' ').collect();
    let [day, month, year, time, "GMT"] = parts.as_slice() else {
        return None;
    };
    let day: u64 = day.parse().ok()?;
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let month = MONTHS.iter().position(|m| m == month)? as u64 + 1;
    let year: u64 = year.parse().ok()?;
    let hms: Vec<u64> = time
        .split(':')
        .map(|p| p.parse().ok())
        .collect::<Option<_>>()?;
    let [h, m, s] = hms.as_slice() else {
        return None;
    };
    if !(1..=31).contains(&day) || year < 1970 || *h > 23 || *m > 59 || *s > 60 {
        return None;
    }
    // Days from 1970-01-01 to the date (Howard Hinnant's days_from_civil).
    let (y, mo) = if month <= 2 {
        (year - 1, month + 9)
    } else {
        (year, month - 3)
    };
    let era = y / 400;
    let yoe = y - era * 400;
    let doy = (153 * mo + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = (era * 146_097 + doe).checked_sub(719_468)?;
    Some(days * 86_400 + h * 3600 + m * 60 + s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_forms() {
        let now = UNIX_EPOCH + Duration::from_secs(784_111_777); // Sun, 06 Nov 1994 08:49:37 GMT
        assert_eq!(
            retry_after(None, Some("7"), now),
            Some(Duration::from_secs(7))
        );
        assert_eq!(
            retry_after(Some("1500"), Some("7"), now),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(
            retry_after(None, Some("Sun, 06 Nov 1994 08:50:07 GMT"), now),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            retry_after(None, Some("Sat, 05 Nov 1994 08:49:37 GMT"), now),
            Some(Duration::ZERO)
        );
        assert_eq!(retry_after(None, Some("soon"), now), None);
        assert_eq!(retry_after(None, None, now), None);
    }

    #[test]
    fn backoff_ceilings_double_up_to_the_max_and_jitter_stays_below() {
        let r = Retry::default();
        let c: Vec<u128> = (1..=8).map(|n| r.ceiling(n).as_millis()).collect();
        assert_eq!(c, [500, 1000, 2000, 4000, 8000, 16000, 20000, 20000]);
        assert_eq!(r.ceiling(200), r.max_delay);
        let mut j = Jitter::new();
        for _ in 0..100 {
            assert!(j.upto(Duration::from_millis(500)) <= Duration::from_millis(500));
        }
        assert_eq!(j.upto(Duration::ZERO), Duration::ZERO);
    }

    /// `never` sends each request once; the rest is the default policy.
    #[test]
    fn never_sends_one_request() {
        let never = Retry::never();
        assert_eq!(never.attempts, 1);
        assert_eq!(
            (never.base_delay, never.max_delay, never.budget),
            (
                Duration::from_millis(500),
                Duration::from_secs(20),
                Duration::from_secs(60)
            )
        );
    }

    /// The jitter is Marsaglia's xorshift64 with shifts 13, 7, 17: from
    /// seed 1 its first outputs are the reference sequence (1082269761, …),
    /// and a draw below a ceiling is the output modulo ceiling + 1.
    #[test]
    fn jitter_is_xorshift64() {
        let mut j = Jitter(1);
        let first: Vec<u64> = (0..4).map(|_| j.next()).collect();
        assert_eq!(
            first,
            [
                1_082_269_761,
                1_152_992_998_833_853_505,
                11_177_516_664_432_764_457,
                17_678_023_832_001_937_445
            ]
        );
        let mut j = Jitter(1);
        let draws: Vec<Duration> = (0..4).map(|_| j.upto(Duration::from_nanos(1000))).collect();
        assert_eq!(draws, [573, 328, 812, 41].map(Duration::from_nanos));
    }

    /// Draws from a freshly seeded jitter spread over the range rather
    /// than repeat one value.
    #[test]
    fn jitter_spreads_its_draws() {
        let mut j = Jitter::new();
        let ceiling = Duration::from_millis(500);
        let draws: std::collections::BTreeSet<Duration> =
            (0..100).map(|_| j.upto(ceiling)).collect();
        assert!(draws.len() > 90, "{draws:?}");
        assert!(draws.iter().any(|d| *d < ceiling / 2), "{draws:?}");
        assert!(draws.iter().any(|d| *d > ceiling / 2), "{draws:?}");
    }

    /// A `retry-after-ms` that is negative or not finite is ignored and
    /// `Retry-After` decides (a wait cannot be negative or endless).
    #[test]
    fn an_impossible_retry_after_ms_is_ignored() {
        let now = UNIX_EPOCH + Duration::from_secs(1_000_000_000);
        for ms in ["-5", "inf", "-inf", "NaN", "soon"] {
            assert_eq!(
                retry_after(Some(ms), Some("7"), now),
                Some(Duration::from_secs(7)),
                "{ms}"
            );
        }
        assert_eq!(retry_after(Some("0"), Some("7"), now), Some(Duration::ZERO));
    }

    /// An HTTP date is read up to each field's last valid value (day 31,
    /// 23:59, a leap second 60, the year 1970) and refused one past it.
    #[test]
    fn http_dates_out_of_range_are_refused() {
        assert_eq!(http_date("Thu, 01 Jan 1970 00:00:00 GMT"), Some(0));
        assert_eq!(http_date("Sat, 31 Jan 1970 23:59:00 GMT"), Some(2_678_340));
        // python3: datetime(2024, 2, 29, 23, 59, 59, tzinfo=utc).timestamp()
        assert_eq!(
            http_date("Thu, 29 Feb 2024 23:59:59 GMT"),
            Some(1_709_251_199)
        );
        assert_eq!(
            http_date("Thu, 29 Feb 2024 23:59:60 GMT"),
            Some(1_709_251_200)
        );
        for bad in [
            "Mon, 00 Jan 1994 08:49:37 GMT",
            "Mon, 32 Jan 1994 08:49:37 GMT",
            "Mon, 07 Nov 1994 24:00:00 GMT",
            "Mon, 07 Nov 1994 08:60:00 GMT",
            "Mon, 07 Nov 1994 08:49:61 GMT",
            "Wed, 31 Dec 1969 23:59:59 GMT",
            "Mon, 07 Nov 0 08:49:37 GMT",
        ] {
            assert_eq!(http_date(bad), None, "{bad}");
        }
    }
}
