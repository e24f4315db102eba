-- q4: the average closing price of the auctions of each category.
CREATE MATERIALIZED VIEW q4 AS
SELECT q.category, AVG(q.final) AS avg_final
FROM (SELECT MAX(b.price) AS final, a.category
      FROM auction AS a JOIN bid AS b ON a.id = b.auction
      WHERE b.date_time BETWEEN a.date_time AND a.expires
      GROUP BY a.id, a.category) AS q
GROUP BY q.category;
