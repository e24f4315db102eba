-- Sources shared by every case of the plan corpus.
CREATE TABLE orders (
  id BIGINT NOT NULL, customer_id BIGINT, product_id BIGINT, qty INT, price DECIMAL(10, 2),
  status STRING, ts TIMESTAMP,
  PRIMARY KEY (id) NOT ENFORCED,
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
);
CREATE TABLE customers (id BIGINT NOT NULL, name STRING, country STRING, PRIMARY KEY (id) NOT ENFORCED);
CREATE TABLE products (id BIGINT NOT NULL, name STRING, category STRING, price DOUBLE,
                       PRIMARY KEY (id) NOT ENFORCED);
CREATE TABLE clicks (
  user_id BIGINT, url STRING, ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL '1' MINUTE
) WITH ('append_only' = 'true');
/* Hostile column names are quoted everywhere. */
CREATE TABLE events (`we;ird col` STRING, `Ünïcode` INT, `back``tick` INT, payload STRING)
WITH ('append_only' = 'true');
