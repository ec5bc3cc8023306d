//! The accounts stage of the faithful query, keyed by car: passes notifications and alerts on,
//! assesses each car's previous toll when it gets its next notification or reaches the exit ramp,
//! and answers the historical queries — the balance (type 2) and a day's expenditure on an
//! expressway (type 3, from the historical tolls; under moirai's rules day 0 is today's charges).
//!
//! A car's events come from several instances of the tolls stage, so they are put back in time
//! order by event time: a charge waits until the watermark reaches its second, a query until the
//! watermark has passed it (it sees every toll charged up to and including its second, as the
//! validator's does: it hands a second's queries on after the second's reports).

use std::collections::BTreeMap;

use moirai_engine::{Operator, Output, Tuple};
use rustc_hash::FxHashMap;

use super::events::{event_ns, Charge};
use super::model::{AccountBalance, DailyExpenditure, LrOutput, QueryKind, QueryRecord, TollAssessment};
use super::rules::Rules;
use super::stats::LinearRoadStats;
use super::tolls::HistoricalTolls;

/// A car's account: the tolls charged to it.
#[derive(Default)]
struct Account {
    /// Sum of the tolls charged.
    balance: u64,
    /// Time of the last charge.
    last_charge: Option<u32>,
    /// Tolls charged today, per expressway (moirai's rules: day 0 of type 3).
    today: Vec<(u16, u64)>,
}

/// The accounts stage.
pub(crate) struct Accounts {
    rules: Rules,
    history: HistoricalTolls,
    stats: LinearRoadStats,
    watermark: u64,
    /// Each car's last notified toll, if not 0, and its expressway.
    pending: FxHashMap<u32, (u32, u16)>,
    accounts: FxHashMap<u32, Account>,
    /// Notifications, exits (phase 0) and queries (phase 1) waiting for the watermark, by (time,
    /// phase, car): a query comes after the charges of its second.
    buffered: BTreeMap<(u32, u8, u32), Vec<Tuple<Charge>>>,
}

impl Accounts {
    pub(crate) fn new(rules: Rules, history: HistoricalTolls, stats: LinearRoadStats) -> Self {
        Accounts {
            rules,
            history,
            stats,
            watermark: 0,
            pending: FxHashMap::default(),
            accounts: FxHashMap::default(),
            buffered: BTreeMap::new(),
        }
    }

    fn charge(&mut self, t: &Tuple<Charge>, out: &mut Output<'_, LrOutput>) {
        let (car, time) = (t.data.car(), t.data.time());
        let fresh = match t.data {
            Charge::Toll { fresh, .. } | Charge::Exit { fresh, .. } => fresh,
            _ => false,
        };
        if fresh {
            // A new trip: the last trip's unpaid toll is not charged (the validator forgets it).
            self.pending.remove(&car);
        }
        let previous = match t.data {
            Charge::Toll { notification, xway, .. } if notification.toll > 0 => {
                self.pending.insert(car, (notification.toll, xway))
            }
            Charge::Query(q) => return self.answer(t, &q, out),
            _ => self.pending.remove(&car),
        };
        if let Some((toll, xway)) = previous {
            let account = self.accounts.entry(car).or_default();
            account.balance += toll as u64;
            account.last_charge = Some(time);
            if self.rules == Rules::Moirai {
                match account.today.iter_mut().find(|(x, _)| *x == xway) {
                    Some((_, sum)) => *sum += toll as u64,
                    None => account.today.push((xway, toll as u64)),
                }
            }
            out.emit(t.with(LrOutput::Assessment(TollAssessment { car, time, toll })));
        }
    }

    fn answer(&self, t: &Tuple<Charge>, q: &QueryRecord, out: &mut Output<'_, LrOutput>) {
        let account = self.accounts.get(&q.car);
        let output = match q.kind {
            QueryKind::AccountBalance => LrOutput::Balance(AccountBalance {
                car: q.car,
                time: q.time,
                result_time: self.rules.balance_result_time(q.time, account.and_then(|a| a.last_charge)),
                qid: q.qid,
                bal: account.map_or(0, |a| a.balance),
            }),
            QueryKind::DailyExpenditure => {
                let bal = match (self.rules, q.day) {
                    (Rules::Validator, 0) => return self.stats.expenditure_for_today(),
                    (Rules::Moirai, 0) => {
                        let today = account.map_or(&[][..], |a| &a.today[..]);
                        today.iter().find(|(x, _)| i32::from(*x) == q.xway).map_or(0, |&(_, sum)| sum)
                    }
                    (Rules::Validator, day) => match self.history.toll(q.car, q.xway, day) {
                        Some(toll) => toll,
                        None => return self.stats.expenditure_without_toll(),
                    },
                    (Rules::Moirai, day) => self.history.toll(q.car, q.xway, day).unwrap_or(0),
                };
                LrOutput::Expenditure(DailyExpenditure { car: q.car, time: q.time, qid: q.qid, bal })
            }
            QueryKind::TravelTime => return,
        };
        out.emit(t.with(output));
    }

    fn release(&mut self, watermark: Option<u64>, out: &mut Output<'_, LrOutput>) {
        while let Some(entry) = self.buffered.first_entry() {
            let &(time, phase, _) = entry.key();
            // Charges once the watermark reaches their second, queries once it has passed it.
            if watermark.is_some_and(|w| if phase == 0 { event_ns(time) > w } else { event_ns(time) >= w }) {
                break;
            }
            for t in entry.remove() {
                self.charge(&t, out);
            }
        }
    }
}

impl Operator<Charge, LrOutput> for Accounts {
    fn process(&mut self, t: Tuple<Charge>, out: &mut Output<'_, LrOutput>) {
        let phase = match t.data {
            Charge::Alert(alert) => return out.emit(t.with(LrOutput::Alert(alert))),
            Charge::Toll { notification, .. } => {
                out.emit(t.with(LrOutput::Toll(notification)));
                0
            }
            Charge::Exit { .. } => 0,
            Charge::Query(_) => 1,
        };
        // A car's earlier events all have arrived once the watermark reaches this one's time;
        // a query waits until its whole second has.
        let due = if phase == 0 { t.event_ns <= self.watermark } else { t.event_ns < self.watermark };
        if due {
            self.charge(&t, out);
        } else {
            self.buffered.entry((t.data.time(), phase, t.data.car())).or_default().push(t);
        }
    }

    fn on_watermark(&mut self, watermark: u64, out: &mut Output<'_, LrOutput>) {
        self.watermark = watermark;
        self.release(Some(watermark), out);
    }

    fn on_end(&mut self, out: &mut Output<'_, LrOutput>) {
        self.release(None, out);
    }
}
