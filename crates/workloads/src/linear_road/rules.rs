//! The rules where Linear Road's readings differ: as the benchmark's validator applies them (the
//! default), or as moirai read the specification before it could check against the validator.
//!
//! The specification (Arasu et al., VLDB 2004) leaves several details open, and the benchmark's
//! validator (`ValidateMTBQEven3AeroTolls` in Walmart's Linear Road toolkit) settles them in its
//! code; answers are judged against it, so [`Rules::Validator`] is the default. [`Rules::Moirai`]
//! keeps moirai's earlier reading, where it differs. `docs/linear-road.md` lists every rule side
//! by side; in short:
//!
//! | rule | `validator` (default) | `moirai` |
//! |---|---|---|
//! | LAV | `round(Σ speeds / Σ reports)` over the segment's reports of minutes m−5…m−1 | floor of the mean, over those minutes with traffic, of the floor of the mean of the cars' floor mean speeds |
//! | accident place | same expressway, direction, lane and position | same expressway, direction and position, any lane |
//! | alert window | minutes detected+1 … cleared (inclusive) | minutes in which the accident was in effect during the previous minute (detected+1 … cleared+1) |
//! | new trip | a report on the entrance ramp more than 60 s after the car's last, or on another expressway or direction, starts afresh: its unpaid toll is dropped | one car continues |
//! | after the exit | the car's reports are ignored (counted) until it enters again on lane 0 | processed |
//! | toll charged at the exit | only if the exit-ramp report is the car's first in its segment | at the first exit-ramp report |
//! | balance result time | the query's time | the time of the last charge |
//! | daily expenditure | the tolls file's toll for the car, day and expressway; none (counted) without one, or for day 0 | the table's toll; day 0 = today's tolls; 0 without one |
//! | output lines | alert `1,Time,Emit,XWay,Seg,Dir,VID`; Emit = response time in ms; no assessments | alert `1,VID,Time,Emit,Seg`; Emit = time + response time (s); assessments as type 5 |

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::model::{minute, PositionReport, ENTRY_LANE, EXIT_LANE, LAV_MINUTES};

/// Which reading of the benchmark's rules a run follows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Rules {
    /// As the benchmark's validator applies them: its answers are the benchmark's.
    #[default]
    Validator,
    /// moirai's earlier reading of the specification, where it differs from the validator.
    Moirai,
}

impl fmt::Display for Rules {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Rules::Validator => "validator",
            Rules::Moirai => "moirai",
        })
    }
}

impl FromStr for Rules {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "validator" => Ok(Rules::Validator),
            "moirai" => Ok(Rules::Moirai),
            other => Err(format!(
                "unknown Linear Road rules '{other}'; use 'validator' (the benchmark validator's answers) or 'moirai' \
                 (moirai's earlier reading)"
            )),
        }
    }
}

/// What a segment saw in one minute: enough for either rule's LAV and for NOV.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MinuteStats {
    /// Distinct cars that reported there (NOV for the next minute).
    pub cars: u32,
    /// Sum of the speeds of all its reports.
    pub speed_sum: u64,
    /// Its reports.
    pub reports: u32,
    /// The floor of the mean, over its cars, of each car's floor mean speed (moirai's average).
    pub car_average: u32,
}

impl MinuteStats {
    /// The statistics of a minute from each car's `(sum of speeds, reports)`.
    pub fn from_cars<'a>(cars: impl IntoIterator<Item = &'a (u32, u32)>) -> MinuteStats {
        let mut s = MinuteStats::default();
        let mut means = 0u64;
        for &(speed, reports) in cars {
            s.cars += 1;
            s.speed_sum += speed as u64;
            s.reports += reports;
            means += (speed / reports.max(1)) as u64;
        }
        s.car_average = if s.cars == 0 { 0 } else { (means / s.cars as u64) as u32 };
        s
    }
}

impl Rules {
    /// The latest average velocity for a report in minute `m`, from `stats(k)` of the segment's
    /// minutes `k` (`None` when no car reported there): minutes `m−5 … m−1`.
    pub fn lav(self, m: u32, stats: impl Fn(u32) -> Option<MinuteStats>) -> u32 {
        let minutes = (m.saturating_sub(LAV_MINUTES).max(1)..m).filter_map(stats);
        match self {
            Rules::Validator => {
                let (sum, reports) = minutes.fold((0u64, 0u64), |(s, r), k| (s + k.speed_sum, r + k.reports as u64));
                // Java's Math.round(sum / (float) reports): half up. Exact in integers.
                (2 * sum + reports).checked_div(2 * reports).unwrap_or(0) as u32
            }
            Rules::Moirai => {
                let (sum, n) = minutes.fold((0u64, 0u64), |(s, n), k| (s + k.car_average as u64, n + 1));
                sum.checked_div(n).unwrap_or(0) as u32
            }
        }
    }

    /// Whether an accident detected at `start` and cleared at `end` (`None`: not yet) is
    /// reported to a car entering a segment in minute `m` (and zeroes its toll).
    pub fn alerts(self, start: u32, end: Option<u32>, m: u32) -> bool {
        match self {
            // The minute after detection, up to and including the minute it was cleared in.
            Rules::Validator => {
                let from = minute(start) + 1;
                from <= m && end.is_none_or(|e| m <= minute(e))
            }
            // In effect at some instant of minute m − 1: started before its end, ended after
            // its start.
            Rules::Moirai => {
                if m < 2 {
                    return false;
                }
                let (from, to) = ((m - 2) * 60, (m - 1) * 60);
                start < to && end.is_none_or(|e| e > from)
            }
        }
    }

    /// The lane that is part of an accident's place: the lane itself, or one for all lanes.
    pub fn accident_lane(self, lane: u8) -> u8 {
        match self {
            Rules::Validator => lane,
            Rules::Moirai => 0,
        }
    }

    /// What a car's report `p` is, given its previous report `last` (if it has one).
    pub fn trip(self, last: Option<&PositionReport>, p: &PositionReport) -> Trip {
        let Some(last) = last else { return Trip::New };
        if self == Rules::Moirai {
            return Trip::Continues;
        }
        let elsewhere = last.xway != p.xway || last.dir != p.dir;
        if elsewhere || (p.lane == ENTRY_LANE && p.time > last.time.saturating_add(60)) {
            Trip::New
        } else if last.lane == EXIT_LANE && p.lane != ENTRY_LANE {
            Trip::Ignored
        } else {
            Trip::Continues
        }
    }

    /// Whether a car's report on the exit ramp charges its last toll: `entered` says it is the
    /// car's first report in this segment, `first_exit` its first on the exit ramp.
    pub fn charges_at_exit(self, entered: bool, first_exit: bool) -> bool {
        match self {
            Rules::Validator => entered,
            Rules::Moirai => first_exit,
        }
    }

    /// The result time of an account balance asked at `time`; `last_charge` is when the car was
    /// last charged.
    pub fn balance_result_time(self, time: u32, last_charge: Option<u32>) -> u32 {
        match self {
            Rules::Validator => time,
            Rules::Moirai => last_charge.unwrap_or(time),
        }
    }
}

/// How a position report relates to the car's trip so far.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trip {
    /// The car's first report, or (validator) the first of a new trip: it starts afresh and its
    /// unpaid toll is dropped.
    New,
    /// The trip goes on.
    Continues,
    /// (validator) A report after the car's exit that does not enter again: ignored.
    Ignored,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(cars: &[(u32, u32)]) -> MinuteStats {
        MinuteStats::from_cars(cars)
    }

    #[test]
    fn the_two_lavs_differ_as_the_validator_and_moirai_average() {
        // Minute 1: one car at 10 mph twice, one at 61 once; minute 2: one car at 40.
        let m1 = stats(&[(20, 2), (61, 1)]);
        let m2 = stats(&[(40, 1)]);
        assert_eq!((m1.cars, m1.speed_sum, m1.reports, m1.car_average), (2, 81, 3, 35));
        let at = |k: u32| match k {
            1 => Some(m1),
            2 => Some(m2),
            _ => None,
        };
        // Validator: (81 + 40) / 4 = 30.25 → 30. Moirai: (35 + 40) / 2 = 37.
        assert_eq!(Rules::Validator.lav(3, at), 30);
        assert_eq!(Rules::Moirai.lav(3, at), 37);
        // Half up: two reports summing to 101 average 50.5.
        let half = |k: u32| (k == 1).then(|| stats(&[(101, 2)]));
        assert_eq!(Rules::Validator.lav(2, half), 51, "50.5 rounds up, as Java's Math.round does");
        assert_eq!(Rules::Moirai.lav(2, half), 50);
        // Only minutes m−5 … m−1 count; none → 0.
        assert_eq!(Rules::Validator.lav(8, at), 0);
        assert_eq!(Rules::Validator.lav(7, at), 40);
        assert_eq!(Rules::Validator.lav(1, at), 0);
    }

    #[test]
    fn the_alert_windows() {
        // Detected at 90 (minute 2), cleared at 200 (minute 4).
        let v = |m| Rules::Validator.alerts(90, Some(200), m);
        assert_eq!((1..=6).map(v).collect::<Vec<_>>(), [false, false, true, true, false, false]);
        let w = |m| Rules::Moirai.alerts(90, Some(200), m);
        assert_eq!((1..=6).map(w).collect::<Vec<_>>(), [false, false, true, true, true, false]);
        // Not cleared yet: from the minute after detection on.
        assert!(Rules::Validator.alerts(90, None, 40) && !Rules::Validator.alerts(90, None, 2));
        // Cleared in the minute it was detected in: no alert ever under the validator.
        assert!((1..10).all(|m| !Rules::Validator.alerts(70, Some(100), m)));
    }

    #[test]
    fn trips_start_again_on_the_entrance_ramp_or_another_road() {
        let p = |time, xway, lane, dir| PositionReport { time, car: 1, speed: 50, xway, lane, dir, seg: 1, pos: 5280 };
        let v = Rules::Validator;
        assert_eq!(v.trip(None, &p(0, 0, 0, 0)), Trip::New);
        assert_eq!(v.trip(Some(&p(0, 0, 0, 0)), &p(30, 0, 1, 0)), Trip::Continues);
        assert_eq!(v.trip(Some(&p(0, 0, 4, 0)), &p(30, 0, 1, 0)), Trip::Ignored, "after the exit");
        assert_eq!(v.trip(Some(&p(0, 0, 4, 0)), &p(30, 0, 0, 0)), Trip::Continues, "back on the ramp at once");
        assert_eq!(v.trip(Some(&p(0, 0, 4, 0)), &p(61, 0, 0, 0)), Trip::New);
        assert_eq!(v.trip(Some(&p(0, 0, 2, 0)), &p(30, 1, 2, 0)), Trip::New, "another expressway");
        assert_eq!(v.trip(Some(&p(0, 0, 2, 0)), &p(30, 0, 2, 1)), Trip::New, "another direction");
        assert_eq!(Rules::Moirai.trip(Some(&p(0, 0, 4, 0)), &p(3000, 1, 0, 1)), Trip::Continues);
    }

    #[test]
    fn names_parse() {
        assert_eq!("validator".parse::<Rules>(), Ok(Rules::Validator));
        assert_eq!("moirai".parse::<Rules>(), Ok(Rules::Moirai));
        assert!("spec".parse::<Rules>().unwrap_err().contains("'validator'"));
        assert_eq!(Rules::default(), Rules::Validator);
    }
}
