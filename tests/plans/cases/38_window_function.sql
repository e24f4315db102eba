CREATE MATERIALIZED VIEW ranked AS
SELECT id, customer_id, ROW_NUMBER() OVER (PARTITION BY customer_id ORDER BY ts DESC) AS rn FROM orders;
-- Without PARTITION BY the one partition is the whole input: recomputed in full.
CREATE MATERIALIZED VIEW numbered AS SELECT id, COUNT(*) OVER () AS n FROM orders;
