//! Model-checked tests of this module's protocols: every interleaving loom can reach (see the
//! module docs for how to run them).

use std::sync::Arc;

use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use loom::thread;

use super::channel::{channel, Message};
use super::{Signal, TaskState};

#[test]
fn a_notification_while_a_task_runs_is_never_lost_nor_doubled() {
    loom::model(|| {
        let state = Arc::new(TaskState::queued());
        assert!(state.claim());
        let queued = Arc::new(AtomicUsize::new(0));
        let (s, q) = (state.clone(), queued.clone());
        let notifier = thread::spawn(move || {
            if s.notify() {
                q.fetch_add(1, Ordering::SeqCst);
            }
        });
        // The worker lets go of the task while the notification arrives.
        if state.release() {
            queued.fetch_add(1, Ordering::SeqCst);
        }
        notifier.join().unwrap();
        assert_eq!(queued.load(Ordering::SeqCst), 1, "queued exactly once for one notification");
    });
}

#[test]
fn a_queued_task_is_claimed_by_one_worker() {
    loom::model(|| {
        let state = Arc::new(TaskState::queued());
        let wins = Arc::new(AtomicUsize::new(0));
        let workers: Vec<_> = (0..2)
            .map(|_| {
                let (s, w) = (state.clone(), wins.clone());
                thread::spawn(move || {
                    if s.claim() {
                        w.fetch_add(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
        assert_eq!(wins.load(Ordering::SeqCst), 1);
    });
}

#[test]
fn a_sleeper_never_misses_a_notification() {
    loom::model(|| {
        let signal = Arc::new(Signal::default());
        let ready = Arc::new(AtomicBool::new(false));
        let (s, r) = (signal.clone(), ready.clone());
        let waker = thread::spawn(move || {
            r.store(true, Ordering::SeqCst);
            s.notify();
        });
        // No timeout: a lost wake-up deadlocks, which loom reports.
        while !ready.load(Ordering::SeqCst) {
            signal.wait_unless(None, || ready.load(Ordering::SeqCst));
        }
        waker.join().unwrap();
    });
}

#[test]
fn draining_a_full_channel_wakes_its_blocked_producer() {
    loom::model(|| {
        let (consumer, producer) = (Arc::new(Signal::default()), Arc::new(Signal::default()));
        let (tx, rx) = channel::<u8>(2, consumer.clone(), producer.clone());
        tx.send(Message::Batch(vec![crate::Tuple::at(0, 1), crate::Tuple::at(0, 2)])).unwrap();
        assert!(producer.is_blocked());
        let drain = thread::spawn(move || {
            while rx.try_recv().is_none() {
                loom::thread::yield_now();
            }
        });
        // The producer's side of the dedicated model: sleep until unblocked, no timeout.
        while producer.is_blocked() {
            producer.wait_unless(None, || !producer.is_blocked());
        }
        drain.join().unwrap();
    });
}
