//! `channel-bench [CHANNELS]`: what one hop costs a channel, on one thread. For each of
//! `CHANNELS` channels in turn (1 by default), a tuple is sent with the watermark behind it
//! (`Sender::send_batch_then`, as a router does at a low rate) and taken with it
//! (`Receiver::try_recv_giving_back`, as a port does), its vector handed back as a port hands it.
//! 20 million hops in all; prints the nanoseconds per hop. With many channels each one's memory
//! has left the caches by the time its turn comes again (10 000 channels ≈ a 10 000-operator
//! pipeline at a low rate).

use std::sync::Arc;
use std::time::Instant;

use moirai_engine::sync::channel::{channel, Message, Received};
use moirai_engine::sync::Signal;
use moirai_engine::tuple::Tuple;

fn main() {
    let channels: usize = match std::env::args().nth(1).map(|s| s.parse()) {
        None => 1,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => {
            eprintln!("usage: channel-bench [CHANNELS]   (CHANNELS: a whole number above 0)");
            std::process::exit(2);
        }
    };
    let rounds = (20_000_000 / channels).max(1);
    let ends: Vec<_> =
        (0..channels).map(|_| channel::<u64>(1024, Arc::new(Signal::default()), Arc::new(Signal::default()))).collect();
    let mut buffers: Vec<Vec<Tuple<u64>>> = (0..channels).map(|_| Vec::new()).collect();
    let mut spares: Vec<Option<Vec<Tuple<u64>>>> = (0..channels).map(|_| None).collect();
    let mut sum = 0u64;
    let start = Instant::now();
    for r in 0..rounds as u64 {
        for (i, (tx, rx)) in ends.iter().enumerate() {
            buffers[i].push(Tuple::at(0, r));
            tx.send_batch_then(&mut buffers[i], Some(r)).expect("open");
            let Some(Received { message: Message::Batch(mut batch), watermark, .. }) =
                rx.try_recv_giving_back(&mut spares[i])
            else {
                panic!("the batch just sent");
            };
            sum = sum.wrapping_add(batch[0].data + watermark.unwrap_or(0));
            batch.clear();
            spares[i] = Some(batch);
        }
    }
    let hops = rounds * channels;
    println!("{channels} channels: {:.1} ns a hop (checksum {sum})", start.elapsed().as_nanos() as f64 / hops as f64);
}
