-- q11: how many bids each bidder makes per session (a gap of 10 seconds ends one).
CREATE MATERIALIZED VIEW q11 AS
SELECT bidder, COUNT(*) AS bid_count, session_window.start AS starttime, session_window.end AS endtime
FROM bid GROUP BY bidder, session_window(date_time, '10 seconds');
