-- The over_windows pass (plan/rewrites/over.py): window functions left after top_n become an Over node.
CREATE MATERIALIZED VIEW ranked AS
SELECT id, customer_id, ROW_NUMBER() OVER (PARTITION BY customer_id ORDER BY ts DESC) AS rn FROM orders;
CREATE MATERIALIZED VIEW running AS
SELECT id, customer_id, SUM(qty) OVER (PARTITION BY customer_id ORDER BY id ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS s
FROM orders;
-- Already a TopN (the top_n pass ran first): nothing left for this pass.
CREATE MATERIALIZED VIEW first_two AS
SELECT user_id, url, rn FROM (
  SELECT user_id, url, ROW_NUMBER() OVER (PARTITION BY user_id ORDER BY ts, url) AS rn FROM clicks
) AS r WHERE rn <= 2;
