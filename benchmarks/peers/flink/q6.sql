-- Nexmark q6 for Flink SQL, as nexmark/nexmark writes it (nexmark-flink/src/main/resources/queries/q6.sql,
-- Apache License 2.0) with mvengine's column names (date_time, item_name, ...); the INSERT's sink is the
-- runner's blackhole table.
SELECT
    Q.seller,
    AVG(Q.price) OVER
        (PARTITION BY Q.seller ORDER BY Q.date_time ROWS BETWEEN 10 PRECEDING AND CURRENT ROW)
FROM (
    SELECT *, ROW_NUMBER() OVER (PARTITION BY A.id, A.seller ORDER BY B.price DESC) AS rownum
    FROM (SELECT A.id, A.seller, B.price, B.date_time
        FROM auction AS A,
            bid AS B
        WHERE A.id = B.auction
            and B.date_time between A.date_time and A.expires)
    WHERE rownum <= 1
) AS Q;
