CREATE TABLE baskets (id BIGINT NOT NULL, items ARRAY<STRING>, PRIMARY KEY (id) NOT ENFORCED);
CREATE MATERIALIZED VIEW basket_items AS
SELECT b.id, t.item FROM baskets b LATERAL VIEW explode(items) t AS item WHERE t.item <> '';
