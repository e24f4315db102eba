-- q6: each seller's average closing price over their last 10 closed auctions (an OVER window).
CREATE MATERIALIZED VIEW q6 AS
SELECT q.seller, q.id,
       AVG(q.final) OVER (PARTITION BY q.seller ORDER BY q.date_time, q.id
                          ROWS BETWEEN 10 PRECEDING AND CURRENT ROW) AS avg_final
FROM (SELECT a.id, a.seller, MAX(b.price) AS final, MAX(b.date_time) AS date_time
      FROM auction AS a JOIN bid AS b ON a.id = b.auction
      WHERE b.date_time BETWEEN a.date_time AND a.expires
      GROUP BY a.id, a.seller) AS q;
