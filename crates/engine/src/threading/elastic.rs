//! The elastic threading model's settings (`--threading elastic:MIN-MAX:start=N:period=D`).

use std::fmt;
use std::time::Duration;

use super::InvalidSetting;

/// Settings of the elastic model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ElasticConfig {
    /// Fewest worker threads.
    pub min: usize,
    /// Most worker threads (by default the available cores).
    pub max: usize,
    /// The level it starts at.
    pub start: usize,
    /// How often the level is reconsidered.
    pub period: Duration,
    /// Relative difference that counts as a trend (the paper's `SENS`), in thousandths.
    pub sens_permille: u32,
    /// No increase while the system's CPU is busier than this share (0..=1), in thousandths.
    pub max_cpu_permille: u32,
}

impl ElasticConfig {
    /// Defaults: 1 to the available cores, starting at 1, period 1 s, SENS 5 %, CPU bound 80 %.
    pub fn new() -> ElasticConfig {
        ElasticConfig {
            min: 1,
            max: super::available_cores(),
            start: 1,
            period: Duration::from_secs(1),
            sens_permille: 50,
            max_cpu_permille: 800,
        }
    }

    pub(crate) fn sens(&self) -> f64 {
        self.sens_permille as f64 / 1000.0
    }

    /// The CPU bound as a share.
    pub fn max_cpu_share(&self) -> f64 {
        self.max_cpu_permille as f64 / 1000.0
    }

    /// Parses `[MIN-MAX][:start=N][:period=DURATION][:sens=0.05]` (what follows `elastic:`);
    /// `whole` is the whole setting, for messages.
    pub fn parse(params: &str, whole: &str) -> Result<ElasticConfig, InvalidSetting> {
        parse(params, whole).map_err(|message| InvalidSetting::new(whole, message))
    }
}

fn parse(params: &str, whole: &str) -> Result<ElasticConfig, String> {
    {
        let mut c = ElasticConfig::new();
        let mut start = None;
        let number = |what: &str, text: &str| -> Result<usize, String> {
            match text.trim().parse::<usize>() {
                Ok(n) if (1..=super::MAX_POOL_THREADS).contains(&n) => Ok(n),
                _ => Err(format!(
                    "'{whole}': {what} '{text}' must be a whole number from 1 to {}",
                    super::MAX_POOL_THREADS
                )),
            }
        };
        for (i, part) in params.split(':').map(str::trim).filter(|p| !p.is_empty()).enumerate() {
            match part.split_once('=') {
                None if i == 0 => match part.split_once('-') {
                    Some((lo, hi)) => {
                        c.min = number("min", lo)?;
                        c.max = number("max", hi)?;
                    }
                    None => c.max = number("max", part)?,
                },
                Some(("start", v)) => start = Some(number("start", v)?),
                Some(("period", v)) => {
                    c.period = humantime::parse_duration(v.trim())
                        .map_err(|e| format!("'{whole}': period '{v}': {e}; e.g. period=500ms"))?;
                    if c.period < Duration::from_millis(10) {
                        return Err(format!("'{whole}': period {v} is too short; use at least 10ms"));
                    }
                }
                Some(("sens", v)) => match v.trim().parse::<f64>() {
                    Ok(s) if s > 0.0 && s < 1.0 => c.sens_permille = (s * 1000.0).round() as u32,
                    _ => return Err(format!("'{whole}': sens '{v}' must be a fraction between 0 and 1, e.g. 0.05")),
                },
                _ => {
                    return Err(format!(
                        "'{whole}': unknown setting '{part}'; elastic[:MIN-MAX][:start=N][:period=1s][:sens=0.05]"
                    ))
                }
            }
        }
        if c.min > c.max {
            return Err(format!("'{whole}': min {} > max {}; give MIN-MAX with MIN <= MAX", c.min, c.max));
        }
        c.start = start.unwrap_or(c.min);
        if !(c.min..=c.max).contains(&c.start) {
            return Err(format!("'{whole}': start {} is outside {}-{}", c.start, c.min, c.max));
        }
        Ok(c)
    }
}

impl Default for ElasticConfig {
    fn default() -> Self {
        ElasticConfig::new()
    }
}

impl fmt::Display for ElasticConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}:start={}:period={}", self.min, self.max, self.start, humantime::format_duration(self.period))?;
        if self.sens_permille != 50 {
            write!(f, ":sens={}", self.sens())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_parse_and_bad_ones_are_explained() {
        let c = ElasticConfig::parse("2-6:start=3:period=500ms", "elastic:...").unwrap();
        assert_eq!((c.min, c.max, c.start, c.period), (2, 6, 3, Duration::from_millis(500)));
        assert_eq!(ElasticConfig::parse("4", "x").unwrap().max, 4);
        assert!(ElasticConfig::parse("0-2", "x").unwrap_err().to_string().contains("min '0'"));
        assert!(ElasticConfig::parse("1-2:period=1ms", "x").unwrap_err().to_string().contains("too short"));
    }
}
