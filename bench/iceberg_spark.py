"""Times queries in Spark 4.0 local (iceberg-spark-runtime) over the service's REST catalog (bench/iceberg.ts).

Argument: JSON {uri, key, jar, table, queries: {label: sql with {t}}}. Each query runs twice in one JVM;
prints JSON {label: {"rows": [...], "ms": second run's wall time, "firstMs": first run's}}.
"""
import json, os, sys, time

# The Spark session the tests' Spark script uses (test/fixtures/iceberg/lake_spark.py).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'test', 'fixtures', 'iceberg'))
from lake_spark import lake_session

args = json.loads(sys.argv[1])
spark = lake_session(args["uri"], args["key"], args["jar"], 2, "1g")
t = f"lake.lakehouse.`{args['table']}`"
out = {}
for label, sql in args["queries"].items():
    timings = []
    for _ in range(2):
        started = time.perf_counter()
        rows = [list(r) for r in spark.sql(sql.replace("{t}", t)).collect()]
        timings.append((time.perf_counter() - started) * 1000)
    out[label] = {"rows": rows, "ms": timings[1], "firstMs": timings[0]}
print(json.dumps(out))
