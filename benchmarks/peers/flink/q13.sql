-- Nexmark q13 for Flink SQL, after nexmark/nexmark (nexmark-flink/src/main/resources/queries/q13.sql, Apache
-- License 2.0) with mvengine's column names. Nexmark joins `side_input FOR SYSTEM_TIME AS OF B.p_time`, a
-- lookup join, which Flink 2.3 takes only from a lookup source (JDBC, HBase, ...): its filesystem table is
-- refused ("Temporal Table Join requires primary key in versioned table"). Here it is the regular join of the
-- same rows, which holds the side input as state (it never changes in the benchmark, so the rows are the same).
SELECT
    B.auction,
    B.bidder,
    B.price,
    B.date_time,
    S.`value`
FROM bid B
JOIN side_input AS S
ON mod(B.auction, 10000) = S.key;
