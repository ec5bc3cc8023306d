//! Processing-time timers of a custom operator fire while the query runs, wherever the planner
//! puts the operator: on its own thread, chained behind another operator, or chained behind a
//! source (whose thread then drives the timers as well as the generator).

mod common;

use moirai_engine::{now_ns, Engine, Operator, Output, Query, Source, Tuple};

use common::{wait_or_fail, wait_until, HANG};

/// Swallows its input; once a tuple has arrived, asks for a timer and emits one marker when it
/// fires.
struct Alarm {
    due: Option<u64>,
    fired: bool,
}

impl Operator<u64, &'static str> for Alarm {
    fn process(&mut self, _t: Tuple<u64>, _out: &mut Output<'_, &'static str>) {
        if self.due.is_none() && !self.fired {
            self.due = Some(now_ns() + 1_000_000);
        }
    }
    fn next_timer(&self) -> Option<u64> {
        self.due
    }
    fn on_timer(&mut self, now_ns: u64, out: &mut Output<'_, &'static str>) {
        assert!(self.due.is_some_and(|d| d <= now_ns), "on_timer before the timer was due");
        self.due = None;
        self.fired = true;
        out.emit(Tuple::at(now_ns, "alarm"));
    }
}

/// An endless, slow source (so the query never ends on its own) → optional map → alarm → sink.
fn alarm_fires(chaining: bool, with_map: bool, expected_head: &str) {
    let q = Query::new("timers");
    let mut s = q.source("ticks", Source::new(|_, _| 0u64..).rate(100.0));
    if with_map {
        // Rebalance keeps the map off the source's thread; the alarm may chain behind the map.
        s = s.rebalance().map("id", |x| x);
    }
    let out = s.process("alarm", |_| Alarm { due: None, fired: false }).collect("out");
    let engine = Engine::start(common::config(16, 4, chaining), vec![q.build().unwrap()]).unwrap();
    let alarm = engine.topology().physical.into_iter().find(|o| o.logical_names.contains(&"alarm".into())).unwrap();
    assert_eq!(alarm.logical_names[0], expected_head, "the planner placed the alarm elsewhere");
    wait_until(&format!("the alarm to fire in '{}'", alarm.name), HANG, || engine.totals().tuples_out > 0);
    engine.stop();
    wait_or_fail(engine, HANG).unwrap();
    assert_eq!(out.take().into_iter().map(|t| t.data).collect::<Vec<_>>(), vec!["alarm"]);
}

#[test]
fn a_timer_fires_on_its_own_thread() {
    alarm_fires(false, true, "alarm");
}

#[test]
fn a_timer_fires_chained_behind_an_operator() {
    alarm_fires(true, true, "id");
}

#[test]
fn a_timer_fires_chained_behind_a_source() {
    alarm_fires(true, false, "ticks");
}

#[test]
fn a_pending_timer_does_not_keep_a_finished_query_alive() {
    // A bounded source ends the query even though the alarm still waits for its timer; the
    // operator's `on_end` is its last word (Alarm emits nothing there).
    let q = Query::new("bounded");
    let out = q
        .source("three", Source::new(|_, _| 0u64..3))
        .process("alarm", |_| Alarm { due: None, fired: false })
        .collect("out");
    let engine = Engine::start(common::config(16, 4, true), vec![q.build().unwrap()]).unwrap();
    let summary = wait_or_fail(engine, HANG).unwrap();
    assert_eq!(summary.tuples_in, 3);
    // Whether the timer came due before the end is up to the clock; at most one alarm either way.
    assert!(out.take().len() <= 1);
}
