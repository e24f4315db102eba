-- Nexmark's three streams (the benchmark of streaming SQL engines: an online auction site). `mv demo` in this
-- project writes them as Nexmark's generator shapes them: of every 50 events, 1 new person, 3 new auctions and
-- 46 bids, most bids on a few hot auctions by a few hot bidders.
CREATE TABLE person (
  id BIGINT NOT NULL, name STRING, email_address STRING, credit_card STRING, city STRING, state STRING,
  date_time TIMESTAMP, extra STRING,
  PRIMARY KEY (id) NOT ENFORCED,
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND
);
CREATE TABLE auction (
  id BIGINT NOT NULL, item_name STRING, description STRING, initial_bid BIGINT, reserve BIGINT,
  date_time TIMESTAMP, expires TIMESTAMP, seller BIGINT, category BIGINT, extra STRING,
  PRIMARY KEY (id) NOT ENFORCED,
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND
);
CREATE TABLE bid (
  auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, url STRING, date_time TIMESTAMP, extra STRING,
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND
) WITH ('append_only' = 'true');
-- q13's side input: a small table joined by key.
CREATE TABLE side_input (key BIGINT NOT NULL, value STRING, PRIMARY KEY (key) NOT ENFORCED);
