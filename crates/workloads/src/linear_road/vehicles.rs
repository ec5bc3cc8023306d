//! The vehicles stage of the faithful query: each car's reports in order, keyed by car.
//!
//! It counts identical consecutive reports (a car is stopped at the 4th, until it reports another
//! place), flags the first report in a new segment (a toll notification is due) and the report on
//! the exit ramp that charges the last toll, and follows the car's trips as the rules say: under
//! the validator's rules a report on the entrance ramp more than 60 s after the car's last, or on
//! another expressway or direction, starts a new trip, and the car's reports after its exit are
//! ignored until it enters again.

use moirai_engine::{Output, Tuple};

use super::events::{Input, Place, Request, SegmentEvent};
use super::model::{PositionReport, EXIT_LANE, STOPPED_REPORTS};
use super::rules::{Rules, Trip};
use super::stats::LinearRoadStats;

/// What vehicles remembers about a car.
#[derive(Clone, Debug, Default)]
pub(crate) struct Vehicle {
    last: Option<PositionReport>,
    /// Identical consecutive reports up to the last one.
    run: u32,
    /// Where the car is stopped.
    stopped_at: Option<Place>,
}

/// The stage's function for one tuple of one car (a keyed process: it needs no watermark, a car's
/// reports arrive in order from the single dispatcher).
#[allow(clippy::needless_pass_by_value)] // the engine's keyed-process signature takes the tuple
pub(crate) fn vehicle(
    rules: Rules,
    stats: &LinearRoadStats,
    v: &mut Vehicle,
    t: Tuple<Input>,
    out: &mut Output<'_, SegmentEvent>,
) {
    let p = match t.data {
        Input::Report(p) => p,
        Input::Query(q) => return out.emit(t.with(SegmentEvent::Query(q))),
    };
    let fresh = match rules.trip(v.last.as_ref(), &p) {
        Trip::Ignored => return stats.ignored_report(),
        Trip::New => true,
        Trip::Continues => false,
    };
    let same_place = !fresh && v.last.is_some_and(|q| q.place() == p.place());
    v.run = if same_place { v.run.saturating_add(1) } else { 1 };
    if !same_place {
        if let Some(place) = v.stopped_at.take() {
            out.emit(t.with(SegmentEvent::Stop { place, car: p.car, time: p.time, stopped: false }));
        }
    }
    if v.run == STOPPED_REPORTS {
        let place = (p.segment(), rules.accident_lane(p.lane), p.pos);
        v.stopped_at = Some(place);
        out.emit(t.with(SegmentEvent::Stop { place, car: p.car, time: p.time, stopped: true }));
    }
    let last = if fresh { None } else { v.last };
    let entered = last.is_none_or(|q| q.segment() != p.segment());
    let request = if p.lane == EXIT_LANE {
        let first_exit = last.is_none_or(|q| q.lane != EXIT_LANE);
        if rules.charges_at_exit(entered, first_exit) {
            Request::Exit
        } else {
            Request::None
        }
    } else if entered {
        Request::Notify
    } else {
        Request::None
    };
    v.last = Some(p);
    out.emit(t.with(SegmentEvent::Report { report: p, request, fresh }));
}
