package moirai.storm;

import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.storm.generated.GlobalStreamId;
import org.apache.storm.task.OutputCollector;
import org.apache.storm.task.TopologyContext;
import org.apache.storm.topology.OutputFieldsDeclarer;
import org.apache.storm.topology.base.BaseRichBolt;
import org.apache.storm.tuple.Tuple;

import moirai.jobs.LatencyMeter;
import moirai.jobs.Registry;
import moirai.jobs.Stamped;

/**
 * The sink of every query: latency as the Flink job's ({@link LatencyMeter}), merged into
 * {@link Registry} once every upstream task has sent its {@link End} marker (and at cleanup, if it
 * never came).
 *
 * @param <T> the tuples it takes
 */
class Sink<T extends Stamped> extends BaseRichBolt {
    private static final long serialVersionUID = 1L;

    /** Sink tasks that received every end marker (the topology drained into them). */
    static final AtomicInteger DRAINED = new AtomicInteger();
    /** Sink tasks that started. */
    static final AtomicInteger STARTED = new AtomicInteger();

    private transient LatencyMeter meter;
    private transient int endsExpected;
    private transient int ends;

    @Override
    public void prepare(Map<String, Object> conf, TopologyContext context, OutputCollector collector) {
        meter = new LatencyMeter();
        for (GlobalStreamId input : context.getThisSources().keySet()) {
            if (input.get_streamId().equals(End.STREAM)) {
                endsExpected += context.getComponentTasks(input.get_componentId()).size();
            }
        }
        Registry.SUBTASKS.incrementAndGet();
        STARTED.incrementAndGet();
        open(context);
    }

    /** Prepares the sink. */
    void open(TopologyContext context) {}

    /** What a workload does with each tuple before it is measured (nothing by default). */
    void before(T t) {}

    /** What a workload does with each tuple besides measuring it (nothing by default). */
    void accept(T t, long e2eNs) {}

    @Override
    @SuppressWarnings("unchecked")
    public void execute(Tuple tuple) {
        if (tuple.getSourceStreamId().equals(End.STREAM)) {
            ends++;
            if (ends == endsExpected) {
                meter.close();
                DRAINED.incrementAndGet();
            }
            return;
        }
        T t = (T) tuple.getValue(0);
        before(t);
        accept(t, meter.record(t));
    }

    @Override
    public void cleanup() {
        if (meter != null) {
            meter.close();
        }
    }

    @Override
    public void declareOutputFields(OutputFieldsDeclarer declarer) {}
}
