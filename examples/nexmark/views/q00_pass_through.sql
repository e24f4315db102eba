-- q0: pass-through, the cost of reading and writing.
CREATE MATERIALIZED VIEW q0 AS SELECT auction, bidder, price, date_time, extra FROM bid;
