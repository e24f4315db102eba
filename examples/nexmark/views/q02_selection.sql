-- q2: selection of the bids on some auctions.
CREATE MATERIALIZED VIEW q2 AS SELECT auction, price FROM bid WHERE auction % 123 = 0;
