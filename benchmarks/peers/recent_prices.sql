-- Window functions over event time (docs/guides/top-n-over.md): each bid with the average of its auction's last
-- eleven bids and the bid before it. With --lateness, a bid leaves state once the tenth bid after it is late.
CREATE MATERIALIZED VIEW recent_prices AS
SELECT auction, bidder, date_time, price,
       AVG(price) OVER (PARTITION BY auction ORDER BY date_time, bidder, price
                        ROWS BETWEEN 10 PRECEDING AND CURRENT ROW) AS avg11,
       LAG(price) OVER (PARTITION BY auction ORDER BY date_time, bidder, price) AS previous
FROM bid;
