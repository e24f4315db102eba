CREATE MATERIALIZED VIEW team_base AS SELECT customer_id, qty FROM orders WHERE qty > 0;
CREATE MATERIALIZED VIEW team_sum AS SELECT customer_id, SUM(qty) AS qty FROM team_base GROUP BY customer_id;
CREATE MATERIALIZED VIEW large AS SELECT customer_id FROM team_sum WHERE qty > 1000;
