-- the same name again, in another file
CREATE MATERIALIZED VIEW twice AS SELECT id FROM products;
