package moirai.storm;

import java.util.Map;
import java.util.function.Consumer;

import org.apache.storm.generated.GlobalStreamId;
import org.apache.storm.task.OutputCollector;
import org.apache.storm.task.TopologyContext;
import org.apache.storm.topology.OutputFieldsDeclarer;
import org.apache.storm.topology.base.BaseRichBolt;
import org.apache.storm.tuple.Fields;
import org.apache.storm.tuple.Tuple;
import org.apache.storm.tuple.Values;

import moirai.jobs.Registry;

/**
 * A bolt of these topologies: takes tuple objects from the field {@code t}, hands them to
 * {@link #process}, emits what that gives (unanchored: no acking), and forwards the {@link End}
 * marker once every upstream task has sent its own (calling {@link #end} first).
 *
 * @param <I> the tuples it takes
 * @param <O> the tuples it emits
 */
abstract class Bolt<I, O> extends BaseRichBolt {
    private static final long serialVersionUID = 1L;

    private transient OutputCollector collector;
    private transient Consumer<O> out;
    private transient int endsExpected;
    private transient int ends;
    private transient int task;

    @Override
    public void prepare(Map<String, Object> conf, TopologyContext context, OutputCollector collector) {
        this.collector = collector;
        this.out = o -> collector.emit(new Values(o));
        this.task = context.getThisTaskId();
        for (GlobalStreamId input : context.getThisSources().keySet()) {
            if (input.get_streamId().equals(End.STREAM)) {
                endsExpected += context.getComponentTasks(input.get_componentId()).size();
            }
        }
        Registry.SUBTASKS.incrementAndGet();
        open(context);
    }

    /** Prepares the operator (after the collector). */
    void open(TopologyContext context) {}

    /** Processes one tuple. */
    abstract void process(I t, Consumer<O> out);

    /** The end of the input: every upstream task has sent its last tuple. */
    void end(Consumer<O> out) {}

    @Override
    @SuppressWarnings("unchecked")
    public void execute(Tuple tuple) {
        if (tuple.getSourceStreamId().equals(End.STREAM)) {
            ends++;
            if (ends == endsExpected) {
                end(out);
                collector.emit(End.STREAM, new Values(new End(task)));
            }
            return;
        }
        process((I) tuple.getValue(0), out);
    }

    @Override
    public void declareOutputFields(OutputFieldsDeclarer declarer) {
        declarer.declare(new Fields("t"));
        declarer.declareStream(End.STREAM, new Fields("end"));
    }
}
