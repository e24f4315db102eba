"""A Spark session that knows nothing of mvengine: plain PySpark with Delta's connector, on the Hive metastore
of a project's warehouse, as a notebook of the team would open it. It runs the SQL statements it is given and
prints each query's rows as one JSON line (values as strings, rows sorted). It maps the archive of Spark's
classes that set-up leaves beside the jars (`make class-archive`), as mvengine's own sessions do: class-data
sharing only spares the cold JVM reading and verifying those classes from their jars (a query's session 34 s
from 50, the catalog test 118 s from 135), and changes nothing a query does.

    python plain_spark.py WAREHOUSE JARS_FOLDER "SQL" ...
"""

import glob
import json
import os
import sys

from pyspark.sql import SparkSession


def main(warehouse: str, jars: str, statements: list[str]) -> None:
    metastore = os.path.join(warehouse, "_catalog", "metastore_db")
    java_options = [f"-Dderby.stream.error.file={warehouse}/_catalog/derby.log"]
    for archive in glob.glob(os.path.join(jars, "spark-classes-*.jsa")):
        java_options += [f"-XX:SharedArchiveFile={archive}", "-Xlog:cds=off", "-Xlog:cds+dynamic=off"]
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("a notebook")
        .config("spark.jars", ",".join(sorted(glob.glob(os.path.join(jars, "delta-*.jar")))))
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
        .config("spark.sql.warehouse.dir", warehouse)
        .config(
            "spark.hadoop.javax.jdo.option.ConnectionURL", f"jdbc:derby:;databaseName={metastore};create=true"
        )
        .config("spark.hadoop.datanucleus.schema.autoCreateAll", "true")
        .config("spark.hadoop.hive.metastore.schema.verification", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.databricks.delta.snapshotPartitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.extraJavaOptions", " ".join(java_options))
        .enableHiveSupport()
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    for statement in statements:
        df = spark.sql(statement)
        if statement.lstrip().upper().startswith(("SELECT", "WITH")):
            print(json.dumps(sorted([[str(v) for v in row] for row in df.collect()])), flush=True)
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
