-- q22: the first directories of each bid's URL.
CREATE MATERIALIZED VIEW q22 AS
SELECT auction, bidder, price, channel,
       split(url, '/')[3] AS dir1, split(url, '/')[4] AS dir2, split(url, '/')[5] AS dir3
FROM bid;
