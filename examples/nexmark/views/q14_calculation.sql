-- q14: a projection with computed columns and a filter on them.
CREATE MATERIALIZED VIEW q14 AS
SELECT auction, bidder, 0.908 * price AS price,
       CASE WHEN hour(date_time) >= 8 AND hour(date_time) <= 18 THEN 'dayTime'
            WHEN hour(date_time) <= 6 OR hour(date_time) >= 20 THEN 'nightTime'
            ELSE 'otherTime' END AS bid_time_type,
       date_time, extra, length(extra) - length(replace(extra, 'c', '')) AS c_counts
FROM bid
WHERE 0.908 * price > 1000000 AND 0.908 * price < 50000000;
