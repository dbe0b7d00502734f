"""Times queries in Spark 4.0 local (iceberg-spark-runtime) over the service's REST catalog (bench/iceberg.ts).

Argument: JSON {uri, key, jar, table, queries: {label: sql with {t}}}. Each query runs twice in one JVM;
prints JSON {label: {"rows": [...], "ms": second run's wall time, "firstMs": first run's}}.
"""
import json, sys, time

from pyspark.sql import SparkSession

args = json.loads(sys.argv[1])
spark = (
    SparkSession.builder.master("local[2]")
    .config("spark.jars", args["jar"])
    .config("spark.ui.enabled", "false")
    .config("spark.driver.memory", "1g")
    .config("spark.sql.session.timeZone", "UTC")
    .config("spark.sql.catalog.lake", "org.apache.iceberg.spark.SparkCatalog")
    .config("spark.sql.catalog.lake.type", "rest")
    .config("spark.sql.catalog.lake.uri", args["uri"])
    .config("spark.sql.catalog.lake.credential", "lakehouse:" + args["key"])
    .config("spark.sql.catalog.lake.oauth2-server-uri", args["uri"] + "/v1/oauth/tokens")
    .getOrCreate()
)
spark.sparkContext.setLogLevel("ERROR")
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
