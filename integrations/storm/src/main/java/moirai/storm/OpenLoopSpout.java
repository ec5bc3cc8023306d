package moirai.storm;

import java.util.Map;
import java.util.concurrent.locks.LockSupport;

import org.apache.storm.spout.SpoutOutputCollector;
import org.apache.storm.task.TopologyContext;
import org.apache.storm.topology.OutputFieldsDeclarer;
import org.apache.storm.topology.base.BaseRichSpout;
import org.apache.storm.tuple.Fields;
import org.apache.storm.tuple.Values;

import com.codahale.metrics.Gauge;

import moirai.jobs.Offered;
import moirai.jobs.Registry;
import moirai.jobs.Stamped;

/**
 * An open-loop spout, as moirai's source ({@code crates/engine/src/source.rs}) and the Flink job's
 * {@code OpenLoopSource}: task {@code j} of {@code P} offers its share of the rate on its own clock.
 * Tuple {@code n} is due at {@code start + n / rate} (a ramp integrated); each call of
 * {@link #nextTuple} emits the due tuples (at most {@link #BATCH}), stamped with their intended
 * send time (the due time) and their ingress time (when emitted), or parks until the next one is
 * due (at least 50 µs, at most 1 ms) when ahead. When the topology cannot keep up (Storm stops
 * calling {@code nextTuple} while the spout's downstream queues are full) the spout falls behind;
 * the tuples due but not emitted are the backlog an external broker would hold, exposed as the
 * metrics-v2 gauge {@code pendingRecords} ({@link TopologyContext#registerGauge}). Without a rate
 * limit it emits as fast as Storm calls it (intended = ingress). After {@code --duration} it emits
 * nothing more but one {@link End} marker.
 *
 * <p>Tuples are emitted unanchored (no message ids: no acking), one field {@code t} holding the
 * tuple object.
 *
 * @param <T> the tuples it emits
 */
abstract class OpenLoopSpout<T extends Stamped> extends BaseRichSpout {
    private static final long serialVersionUID = 1L;

    /** The shortest park when ahead of schedule (moirai's {@code MIN_SLEEP_NS}). */
    private static final long MIN_PARK_NS = 50_000;
    /** The longest park in one call: Storm's executor has its own work between calls. */
    private static final long MAX_PARK_NS = 1_000_000;
    /** Most tuples emitted in one call of {@link #nextTuple}. */
    private static final int BATCH = 512;

    private final Offered offered;
    private final long durationNs;

    private transient SpoutOutputCollector collector;
    private transient Registry.SourceMeter meter;
    private transient Offered mine;
    private transient boolean unlimited;
    private transient long start;
    private transient long end;
    private transient long windowStart;
    private transient long windowEnd;
    private transient long n;
    private transient long measured;
    private transient boolean ended;
    private transient int task;

    OpenLoopSpout(Offered offered, long durationNs) {
        this.offered = offered;
        this.durationNs = durationNs;
    }

    /** Prepares the data of instance {@code instance} of {@code parallelism}. */
    abstract void openGenerator(int instance, int parallelism);

    /** The {@code n}-th tuple of this instance (its timestamps are set by the caller). */
    abstract T next(long n);

    @Override
    public void open(Map<String, Object> conf, TopologyContext context, SpoutOutputCollector collector) {
        this.collector = collector;
        int parallelism = context.getComponentTasks(context.getThisComponentId()).size();
        mine = offered.split(parallelism);
        unlimited = mine.isUnlimited();
        meter = new Registry.SourceMeter(mine);
        Registry.SOURCES.add(meter);
        Registry.SUBTASKS.incrementAndGet();
        Registry.SourceMeter m = meter;
        context.registerGauge("pendingRecords", (Gauge<Long>) m::pending);
        task = context.getThisTaskId();
        openGenerator(context.getThisTaskIndex(), parallelism);
    }

    @Override
    public void nextTuple() {
        if (ended) {
            LockSupport.parkNanos(MAX_PARK_NS);
            return;
        }
        long now = System.nanoTime();
        if (start == 0) {
            start = now;
            Registry.markStart(now);
            meter.start(now);
            end = now + durationNs;
            windowStart = Registry.windowStartNs();
            windowEnd = Registry.windowEndNs();
        }
        if (now - end >= 0) {
            meter.progress(n, measured);
            meter.finish();
            ended = true;
            collector.emit(End.STREAM, new Values(new End(task)));
            return;
        }
        long due = unlimited ? n + BATCH : Math.min(mine.due(now - start), n + BATCH);
        if (due <= n) {
            long next = start + mine.intendedNs(n);
            LockSupport.parkNanos(Math.min(Math.max(next - now, MIN_PARK_NS), Math.min(MAX_PARK_NS, end - now)));
            now = System.nanoTime();
            if (now - end >= 0) {
                return;
            }
            due = Math.min(mine.due(now - start), n + BATCH);
        }
        for (; n < due; n++) {
            T t = next(n);
            long ingress = System.nanoTime();
            t.ingressNs = ingress;
            t.intendedNs = unlimited ? ingress : start + mine.intendedNs(n);
            if (ingress - windowStart >= 0 && ingress - windowEnd < 0) {
                measured++;
            }
            collector.emit(new Values(t));
        }
        meter.progress(n, measured);
    }

    @Override
    public void declareOutputFields(OutputFieldsDeclarer declarer) {
        declarer.declare(new Fields("t"));
        declarer.declareStream(End.STREAM, new Fields("end"));
    }
}
