-- q10: every bid with the day and minute it belongs to (Nexmark writes them to partitioned files).
CREATE MATERIALIZED VIEW q10 AS
SELECT auction, bidder, price, date_time, extra,
       date_format(date_time, 'yyyy-MM-dd') AS dt, date_format(date_time, 'HH:mm') AS hm
FROM bid;
