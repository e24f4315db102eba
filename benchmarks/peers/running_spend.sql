-- Not a Nexmark query: a running window over the bids (each bidder's spend so far, and the bid's place in it),
-- for the running windows' carry (incremental/over_carry.py). Run it with --lateness to bound its state:
--   .venv/bin/python benchmarks/peers/mvengine_saturation.py /tmp/ev benchmarks/peers/running_spend.sql --lateness '10 seconds'
CREATE MATERIALIZED VIEW running_spend AS
SELECT bidder, date_time, auction, price,
       SUM(price) OVER (PARTITION BY bidder ORDER BY date_time, auction, price) AS spent,
       ROW_NUMBER() OVER (PARTITION BY bidder ORDER BY date_time, auction, price) AS nth
FROM bid;
