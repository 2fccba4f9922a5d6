import json, sys, time, urllib.request
from pyflink.common import Configuration, Types, WatermarkStrategy
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.connectors.number_seq import NumberSequenceSource

conf = Configuration()
conf.set_string("rest.port", "18081")
conf.set_string("rest.bind-address", "127.0.0.1")
conf.set_string("rest.address", "127.0.0.1")
conf.set_string("python.executable", sys.executable)
conf.set_string("python.client.executable", sys.executable)
env = StreamExecutionEnvironment.get_execution_environment(conf)
env.set_parallelism(2)
env.enable_checkpointing(4000)

def slow(t):
    if t[0] == 1:
        time.sleep(0.002)  # one key's subtask is slow: backpressure, barriers wait behind its records
    return t

src = env.from_source(NumberSequenceSource(0, 10**12), WatermarkStrategy.no_watermarks(), "numbers")
(src.map(lambda x: (x % 2, x), output_type=Types.TUPLE([Types.LONG(), Types.LONG()]))
    .key_by(lambda t: t[0], key_type=Types.LONG())
    .map(slow, output_type=Types.TUPLE([Types.LONG(), Types.LONG()]))
    .filter(lambda t: False)
    .print())
client = env.execute_async("clusterdoctor-backpressure-capture")
print("job", client.get_job_id(), flush=True)
time.sleep(float(sys.argv[1]) if len(sys.argv) > 1 else 90)
client.cancel()
