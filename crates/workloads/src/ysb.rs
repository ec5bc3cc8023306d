//! The Yahoo Streaming Benchmark (YSB; `reference/workloads.md` §4), Redis-free as in
//! ParaGroup's StreamBenchmarks, with the JSON parsing kept in the pipeline for the original
//! per-tuple cost.
//!
//! ```text
//! events → deserialize → filter(view) → project → join(ad → campaign) ─key_by(campaign)→ window(10 s, count) → sink
//! ```
//!
//! - **Events**: seeded JSON ad events with Yahoo's schema (`user_id`, `page_id`, `ad_id`,
//!   `ad_type`, `event_type` ∈ {view, click, purchase}, `event_time` in ms, `ip_address`), ids are
//!   UUIDs, 100 campaigns × 10 ads. As from Kafka, each arrives as a record ([`AdRecord`]) whose
//!   timestamp is the event's *scheduled* send time (Yahoo's generator stamps events the same
//!   way), so event time follows the engine clock and window latency means something.
//! - **Query**: the JSON is parsed (serde_json) and the tuple takes its event time from
//!   `event_time`; views are kept (about a third), projected to `(ad_id, event_time)`, joined to
//!   their campaign through an in-memory table (Yahoo used Redis), and counted per campaign in
//!   tumbling event-time windows.
//! - **Window latency** = when the sink receives a window's count − the window's end (the
//!   measure Ververica proposed instead of Yahoo's `time_updated − window_start − 10 s`). The
//!   [`YsbHandle`] keeps its distribution and the counts; for a finite run at a fixed rate it
//!   regenerates the same events and compares with a naive count ([`YsbHandle::check`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use hdrhistogram::Histogram;
use moirai_engine::metrics::{latency_histogram, latency_of, Latency};
use moirai_engine::{
    now_ns, Agg, BuildError, BuiltQuery, Operator, Output, Query, Source, Tuple, Window, WindowResult,
};
use rustc_hash::FxHashMap;

/// Yahoo's ad types.
pub const AD_TYPES: [&str; 5] = ["banner", "modal", "sponsored-search", "mail", "mobile"];
/// Yahoo's event types; only views are counted.
pub const EVENT_TYPES: [&str; 3] = ["view", "click", "purchase"];
/// Users and pages in Yahoo's generator.
const USERS: usize = 100;

/// Parameters of a YSB run.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct YsbConfig {
    /// Offered events per second in total; 0 = as fast as possible (event time is then the time
    /// an event was made, and [`YsbHandle::check`] cannot regenerate it).
    pub rate: f64,
    /// Seed of the ids and the events.
    pub seed: u64,
    /// Instances of every stage but the sink.
    pub parallelism: usize,
    /// Events in total; 0 = endless.
    pub events: u64,
    /// Campaigns (Yahoo: 100).
    pub campaigns: usize,
    /// Ads per campaign (Yahoo: 10).
    pub ads_per_campaign: usize,
    /// Length of the tumbling windows, ms (Yahoo: 10 000).
    pub window_ms: u64,
    /// Watermarks trail the latest event time by this much, ms.
    pub out_of_orderness_ms: u64,
    /// When every source instance's first event is scheduled, ns on the engine clock; `None`:
    /// when the instance starts. Micro-batch runs fix it (at 0) so that every executor process
    /// regenerates the same events.
    pub origin_ns: Option<u64>,
}

impl Default for YsbConfig {
    /// Yahoo's setup at its lowest load, 50 000 events/s.
    fn default() -> Self {
        YsbConfig {
            rate: 50_000.0,
            seed: 0,
            parallelism: 1,
            events: 0,
            campaigns: 100,
            ads_per_campaign: 10,
            window_ms: 10_000,
            out_of_orderness_ms: 0,
            origin_ns: None,
        }
    }
}

impl YsbConfig {
    /// Checks every parameter; the error says which and how to fix it.
    pub fn validate(&self) -> Result<(), BuildError> {
        let bad = |m: String| Err(BuildError::Config(m));
        crate::check::rate("rate", self.rate).map_err(BuildError::Config)?;
        crate::check::parallelism("parallelism", self.parallelism, 1024).map_err(BuildError::Config)?;
        if self.campaigns == 0
            || self.ads_per_campaign == 0
            || self.campaigns.saturating_mul(self.ads_per_campaign) > 10_000_000
        {
            return bad(format!(
                "{} campaigns × {} ads: both must be >= 1 and the product at most 10000000 (Yahoo: 100 × 10)",
                self.campaigns, self.ads_per_campaign
            ));
        }
        crate::check::window_ms("window_ms", self.window_ms, "Yahoo: 10000").map_err(BuildError::Config)?;
        Ok(())
    }
}

/// Why a run's output does not check out.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// An endless run has no reference to compare with.
    #[error("the run was endless (events = 0); set a number of events to check its counts")]
    Endless,
    /// At rate 0 event times are the wall clock of generation, which cannot be regenerated.
    #[error("at rate 0 event times are wall-clock readings and cannot be regenerated; check a run with a rate > 0")]
    Unrepeatable,
    /// Counts differ from the naive count.
    #[error(
        "{differing} of {windows} (campaign, window) counts differ, e.g. campaign {campaign} at {start_ns} ns: counted {got}, expected {expected}"
    )]
    Mismatch {
        /// (campaign, window) pairs whose counts differ (in either map).
        differing: usize,
        /// Pairs in the reference.
        windows: usize,
        /// One of them: the campaign.
        campaign: String,
        /// Its window's start, ns on the engine clock.
        start_ns: u64,
        /// Its count in the run.
        got: u64,
        /// Its count in the reference.
        expected: u64,
    },
}

/// An event as the external queue delivers it: a timestamp and the JSON value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdRecord {
    /// Scheduled send time, ns on the engine clock (the record timestamp).
    pub timestamp_ns: u64,
    /// The event, as Yahoo's JSON.
    pub json: String,
}

/// A parsed ad event, with Yahoo's field names.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct AdEvent {
    /// A user's UUID.
    pub user_id: String,
    /// A page's UUID.
    pub page_id: String,
    /// The ad's UUID.
    pub ad_id: String,
    /// One of [`AD_TYPES`].
    pub ad_type: String,
    /// One of [`EVENT_TYPES`].
    pub event_type: String,
    /// Milliseconds on the engine clock, as a string (as Yahoo's generator wrote it).
    pub event_time: String,
    /// Always `"1.2.3.4"`, as in Yahoo's generator.
    pub ip_address: String,
}

/// The ids of the benchmark's world, drawn from the seed.
struct Ids {
    campaigns: Vec<String>,
    /// Ad `a` belongs to campaign `a / ads_per_campaign`.
    ads: Vec<String>,
    ads_per_campaign: usize,
    users: Vec<String>,
    pages: Vec<String>,
}

fn uuid(rng: &mut fastrand::Rng) -> String {
    let (a, b) = (rng.u64(..), rng.u64(..));
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xffff,
        b >> 48,
        b & 0xffff_ffff_ffff
    )
}

impl Ids {
    fn new(config: &YsbConfig) -> Self {
        let mut rng = fastrand::Rng::with_seed(config.seed ^ 0x5953_4249_4453);
        let mut ids = |n: usize| (0..n).map(|_| uuid(&mut rng)).collect::<Vec<_>>();
        Ids {
            campaigns: ids(config.campaigns),
            ads: ids(config.campaigns * config.ads_per_campaign),
            ads_per_campaign: config.ads_per_campaign,
            users: ids(USERS),
            pages: ids(USERS),
        }
    }
}

/// One drawn event, as indices into [`Ids`] and the type tables.
struct Draw {
    user: usize,
    page: usize,
    ad: usize,
    ad_type: usize,
    event_type: usize,
}

impl Draw {
    fn new(rng: &mut fastrand::Rng, ids: &Ids) -> Self {
        Draw {
            user: rng.usize(..ids.users.len()),
            page: rng.usize(..ids.pages.len()),
            ad: rng.usize(..ids.ads.len()),
            ad_type: rng.usize(..AD_TYPES.len()),
            event_type: rng.usize(..EVENT_TYPES.len()),
        }
    }

    fn json(&self, ids: &Ids, timestamp_ns: u64) -> String {
        #[derive(serde::Serialize)]
        struct Json<'a> {
            user_id: &'a str,
            page_id: &'a str,
            ad_id: &'a str,
            ad_type: &'a str,
            event_type: &'a str,
            event_time: String,
            ip_address: &'a str,
        }
        let json = Json {
            user_id: &ids.users[self.user],
            page_id: &ids.pages[self.page],
            ad_id: &ids.ads[self.ad],
            ad_type: AD_TYPES[self.ad_type],
            event_type: EVENT_TYPES[self.event_type],
            event_time: (timestamp_ns / 1_000_000).to_string(),
            ip_address: "1.2.3.4",
        };
        serde_json::to_string(&json).expect("a struct of strings always serialises")
    }
}

/// The events of source instance `instance` of `parallelism`: its share of the total, drawn from
/// its own seed, each scheduled `period_ns` after the previous one from the first event any
/// instance drew (`base_ns`, published to the handle so the run can be regenerated).
struct AdEvents {
    ids: Arc<Ids>,
    rng: fastrand::Rng,
    k: u64,
    remaining: Option<u64>,
    period_ns: f64,
    base_ns: Option<u64>,
    origin_ns: Option<u64>,
    bases: Option<Arc<Mutex<Vec<Option<u64>>>>>,
    instance: usize,
}

impl AdEvents {
    fn new(ids: Arc<Ids>, config: &YsbConfig, instance: usize, parallelism: usize) -> Self {
        let (n, i) = (parallelism as u64, instance as u64);
        AdEvents {
            ids,
            rng: fastrand::Rng::with_seed(config.seed.wrapping_add((i + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15))),
            k: 0,
            remaining: (config.events > 0).then(|| config.events / n + u64::from(i < config.events % n)),
            period_ns: if config.rate > 0.0 { 1e9 * n as f64 / config.rate } else { 0.0 },
            base_ns: None,
            origin_ns: config.origin_ns,
            bases: None,
            instance,
        }
    }

    /// The next event as indices and its scheduled time.
    fn next_draw(&mut self) -> Option<(Draw, u64)> {
        if let Some(r) = &mut self.remaining {
            *r = r.checked_sub(1)?;
        }
        let (origin, instance) = (self.origin_ns, self.instance);
        let base = *self.base_ns.get_or_insert_with(|| match &self.bases {
            // One base for every instance, as the source has one schedule for all of them: an
            // instance that draws first late (its thread started late on a busy machine) would
            // otherwise stamp its events that much ahead of the schedule it is sent on, and the
            // windows would close after the sink had seen them.
            Some(bases) => {
                let mut bases = lock(bases);
                let base = origin.or_else(|| bases.iter().flatten().next().copied()).unwrap_or_else(now_ns);
                bases[instance] = Some(base);
                base
            }
            None => origin.unwrap_or_else(now_ns),
        });
        let timestamp_ns = if self.period_ns > 0.0 { base + (self.k as f64 * self.period_ns) as u64 } else { now_ns() };
        self.k += 1;
        Some((Draw::new(&mut self.rng, &self.ids), timestamp_ns))
    }
}

impl Iterator for AdEvents {
    type Item = AdRecord;
    fn next(&mut self) -> Option<AdRecord> {
        let (draw, timestamp_ns) = self.next_draw()?;
        Some(AdRecord { timestamp_ns, json: draw.json(&self.ids, timestamp_ns) })
    }
}

/// Parses the JSON; the tuple's event time becomes the event's `event_time`.
struct Deserialize {
    malformed: Arc<AtomicU64>,
}

impl Operator<AdRecord, AdEvent> for Deserialize {
    fn process(&mut self, t: Tuple<AdRecord>, out: &mut Output<'_, AdEvent>) {
        let parsed = serde_json::from_str::<AdEvent>(&t.data.json)
            .ok()
            .and_then(|e| e.event_time.parse::<u64>().ok().map(|ms| (e, ms)));
        match parsed {
            Some((event, ms)) => out.emit(Tuple {
                event_ns: ms.saturating_mul(1_000_000),
                intended_ns: t.intended_ns,
                ingress_ns: t.ingress_ns,
                data: event,
            }),
            // A bad record is counted and skipped, as a consumer would, rather than stopping.
            None => {
                self.malformed.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // What these mutexes guard stays consistent even if a holder panicked.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Access to a YSB run's output, during and after the run.
#[derive(Clone)]
pub struct YsbHandle {
    config: YsbConfig,
    ids: Arc<Ids>,
    bases: Arc<Mutex<Vec<Option<u64>>>>,
    counts: Arc<Mutex<BTreeMap<(String, u64), u64>>>,
    latency: Arc<Mutex<Histogram<u64>>>,
    early: Arc<AtomicU64>,
    malformed: Arc<AtomicU64>,
    unknown_ads: Arc<AtomicU64>,
}

impl YsbHandle {
    /// Views per (campaign id, window start in ns on the engine clock), of the windows closed so far.
    pub fn window_counts(&self) -> BTreeMap<(String, u64), u64> {
        lock(&self.counts).clone()
    }

    /// Window latency (sink arrival − window end) of every window result so far that closed on
    /// a watermark, ns.
    pub fn window_latency(&self) -> Histogram<u64> {
        lock(&self.latency).clone()
    }

    /// Window results that reached the sink before their window's end: the last windows of a
    /// finite run, closed early by the end of the input. They have no window latency.
    pub fn early_windows(&self) -> u64 {
        self.early.load(Ordering::Relaxed)
    }

    /// [`Self::window_latency`] summarised, in ms.
    pub fn window_latency_ms(&self) -> Latency {
        latency_of(&self.window_latency())
    }

    /// Records that were not valid event JSON (skipped).
    pub fn malformed(&self) -> u64 {
        self.malformed.load(Ordering::Relaxed)
    }

    /// Views of ads missing from the campaign table (skipped).
    pub fn unknown_ads(&self) -> u64 {
        self.unknown_ads.load(Ordering::Relaxed)
    }

    /// The join table: ad id → campaign id.
    pub fn campaign_of_ad(&self) -> HashMap<String, String> {
        let ids = &self.ids;
        ids.ads
            .iter()
            .enumerate()
            .map(|(a, ad)| (ad.clone(), ids.campaigns[a / ids.ads_per_campaign].clone()))
            .collect()
    }

    /// Regenerates every event of a finite run at a fixed rate, after it ended: for each source
    /// instance, its `(draw, timestamp)` sequence.
    fn replay(&self) -> Result<impl Iterator<Item = (Draw, u64)> + '_, CheckError> {
        if self.config.events == 0 {
            return Err(CheckError::Endless);
        }
        if self.config.rate == 0.0 {
            return Err(CheckError::Unrepeatable);
        }
        let n = self.config.parallelism;
        let bases = lock(&self.bases).clone();
        Ok((0..n).flat_map(move |i| {
            let mut events = AdEvents::new(self.ids.clone(), &self.config, i, n);
            // An instance that never started made no events.
            if bases[i].is_none() {
                events.remaining = Some(0);
            }
            events.base_ns = bases[i];
            std::iter::from_fn(move || events.next_draw())
        }))
    }

    /// The records the run's sources produced, regenerated (finite runs at a fixed rate only).
    pub fn records(&self) -> Result<impl Iterator<Item = AdRecord> + '_, CheckError> {
        Ok(self.replay()?.map(|(draw, ts)| AdRecord { timestamp_ns: ts, json: draw.json(&self.ids, ts) }))
    }

    /// The naive count: views per (campaign, window), straight from the regenerated events.
    pub fn reference(&self) -> Result<BTreeMap<(String, u64), u64>, CheckError> {
        let window_ns = self.config.window_ms * 1_000_000;
        let mut counts = BTreeMap::new();
        for (draw, ts) in self.replay()? {
            if EVENT_TYPES[draw.event_type] == "view" {
                let campaign = self.ids.campaigns[draw.ad / self.ids.ads_per_campaign].clone();
                let event_ns = ts / 1_000_000 * 1_000_000;
                *counts.entry((campaign, event_ns - event_ns % window_ns)).or_insert(0) += 1;
            }
        }
        Ok(counts)
    }

    /// Compares [`Self::window_counts`] with [`Self::reference`]; call it after the run ended.
    pub fn check(&self) -> Result<(), CheckError> {
        let expected = self.reference()?;
        let got = self.window_counts();
        let wrong: Vec<&(String, u64)> = {
            let mut w: Vec<_> = expected.keys().chain(got.keys()).filter(|k| expected.get(*k) != got.get(*k)).collect();
            w.sort();
            w.dedup();
            w
        };
        match wrong.first() {
            None => Ok(()),
            Some(key) => Err(CheckError::Mismatch {
                differing: wrong.len(),
                windows: expected.len(),
                campaign: key.0.clone(),
                start_ns: key.1,
                got: got.get(*key).copied().unwrap_or(0),
                expected: expected.get(*key).copied().unwrap_or(0),
            }),
        }
    }
}

/// Builds the YSB query `ysb` and the handle to its output.
pub fn queries(config: &YsbConfig) -> Result<(Vec<BuiltQuery>, YsbHandle), BuildError> {
    config.validate()?;
    let p = config.parallelism;
    let ids = Arc::new(Ids::new(config));
    let handle = YsbHandle {
        config: config.clone(),
        ids: ids.clone(),
        bases: Arc::new(Mutex::new(vec![config.origin_ns; p])),
        counts: Arc::default(),
        latency: Arc::new(Mutex::new(latency_histogram())),
        early: Arc::default(),
        malformed: Arc::default(),
        unknown_ads: Arc::default(),
    };
    let table: Arc<FxHashMap<String, String>> = Arc::new(handle.campaign_of_ad().into_iter().collect());

    let generator = {
        let (ids, config, bases) = (ids.clone(), config.clone(), handle.bases.clone());
        move |i, n| {
            let mut events = AdEvents::new(ids.clone(), &config, i, n);
            events.bases = Some(bases.clone());
            events
        }
    };
    let source = Source::new(generator)
        .rate(config.rate)
        .event_time(|r: &AdRecord| r.timestamp_ns, Duration::from_millis(config.out_of_orderness_ms));
    let (malformed, unknown) = (handle.malformed.clone(), handle.unknown_ads.clone());
    let query = Query::new("ysb");
    let windows = query
        .source("events", source)
        .parallelism(p)
        .process("deserialize", move |_| Deserialize { malformed: malformed.clone() })
        .parallelism(p)
        .filter("filter", |e: &AdEvent| e.event_type == "view")
        .parallelism(p)
        .map("project", |e: AdEvent| (e.ad_id, e.event_time))
        .parallelism(p)
        .flat_map("join", move |(ad_id, event_time): (String, String)| {
            let campaign = table.get(&ad_id).cloned();
            if campaign.is_none() {
                unknown.fetch_add(1, Ordering::Relaxed);
            }
            campaign.map(|campaign_id| (campaign_id, ad_id, event_time))
        })
        .parallelism(p)
        .serde()
        .key_by(|(campaign_id, _, _): &(String, String, String)| campaign_id.clone())
        .window("window", Window::tumbling(Duration::from_millis(config.window_ms)), Agg::count())
        .parallelism(p)
        .serde();
    let (counts, latency, early) = (handle.counts.clone(), handle.latency.clone(), handle.early.clone());
    windows.sink("sink", move |t: Tuple<WindowResult<String, f64>>| {
        let r = t.data;
        match now_ns().checked_sub(r.end_ns) {
            Some(ns) => lock(&latency).saturating_record(ns.max(1)),
            None => {
                early.fetch_add(1, Ordering::Relaxed);
            }
        }
        *lock(&counts).entry((r.key, r.start_ns)).or_insert(0) += r.value as u64;
    });
    Ok((vec![query.build()?], handle))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_seeded_and_follow_the_schedule() {
        let config = YsbConfig { events: 20, rate: 1_000.0, parallelism: 2, ..YsbConfig::default() };
        let ids = Arc::new(Ids::new(&config));
        let take = |i| {
            let mut e = AdEvents::new(ids.clone(), &config, i, 2);
            e.base_ns = Some(5_000_000_000);
            e.collect::<Vec<_>>()
        };
        let a = take(0);
        assert_eq!(a, take(0), "the same seed gives the same events");
        assert_ne!(a, take(1), "instances draw different events");
        assert_eq!(a.len(), 10);
        // 1000 events/s over 2 instances: one every 2 ms per instance.
        for (k, r) in a.iter().enumerate() {
            assert_eq!(r.timestamp_ns, 5_000_000_000 + k as u64 * 2_000_000);
            let e: AdEvent = serde_json::from_str(&r.json).unwrap();
            assert_eq!(e.event_time, (r.timestamp_ns / 1_000_000).to_string());
            assert!(EVENT_TYPES.contains(&e.event_type.as_str()) && AD_TYPES.contains(&e.ad_type.as_str()));
            assert_eq!(e.ad_id.len(), 36);
        }
    }

    #[test]
    fn an_instance_that_starts_late_stamps_its_events_on_the_common_schedule() {
        let config = YsbConfig { events: 20, rate: 1_000.0, parallelism: 2, ..YsbConfig::default() };
        let ids = Arc::new(Ids::new(&config));
        let bases = Arc::new(Mutex::new(vec![None; 2]));
        let instance = |i| {
            let mut e = AdEvents::new(ids.clone(), &config, i, 2);
            e.bases = Some(bases.clone());
            e
        };
        let (mut first, mut late) = (instance(0), instance(1));
        let start = first.next().unwrap().timestamp_ns;
        std::thread::sleep(Duration::from_millis(30));
        // Its events are behind their schedule (the source sends them late), never ahead of it.
        assert_eq!(late.next().unwrap().timestamp_ns, start, "the first event of the schedule");
        assert_eq!(*lock(&bases), [Some(start), Some(start)], "one base, published for the replay");
    }

    #[test]
    fn the_world_has_yahoos_shape() {
        let ids = Ids::new(&YsbConfig::default());
        assert_eq!((ids.campaigns.len(), ids.ads.len()), (100, 1000));
        let distinct: std::collections::HashSet<_> = ids.ads.iter().chain(&ids.campaigns).collect();
        assert_eq!(distinct.len(), 1100, "ids are distinct");
    }

    #[test]
    fn bad_parameters_are_explained() {
        for (config, needle) in [
            (YsbConfig { campaigns: 0, ..YsbConfig::default() }, "campaigns"),
            (YsbConfig { window_ms: 0, ..YsbConfig::default() }, "window_ms"),
            (YsbConfig { rate: f64::INFINITY, ..YsbConfig::default() }, "rate"),
            (YsbConfig { parallelism: 0, ..YsbConfig::default() }, "parallelism"),
        ] {
            match queries(&config) {
                Err(BuildError::Config(m)) => assert!(m.contains(needle), "'{m}' should mention '{needle}'"),
                _ => panic!("{config:?} should be rejected"),
            }
        }
    }
}
