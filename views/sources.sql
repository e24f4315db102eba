-- The example project's inputs, modelled on the running example of "Streaming SQL"
-- (Akidau, Chernyak, Lax: Streaming Systems, chapter 8):
-- scores that users earn for their team, as append-only events, and the users themselves.

-- Append-only events: every row is a new score; `ts` is event time (rowtime), up to 5 s out of order.
CREATE TABLE user_scores (
  name  STRING NOT NULL,
  team  STRING,
  score INT,
  ts    TIMESTAMP,
  -- Expectations, checked on every batch of new scores: a team outside the league is counted (WARN); a score
  -- outside what the game can give is kept out of every view and kept aside (`mv quarantine user_scores`).
  CONSTRAINT known_team EXPECT COLUMN team VALUES IN ('red', 'blue', 'green'),
  CONSTRAINT plausible_score EXPECT (score BETWEEN -100 AND 100) ON VIOLATION QUARANTINE,
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
) WITH ('append_only' = 'true');

-- Keyed by name: a row per user, updated in place (update / upsert mode).
CREATE TABLE users (
  name    STRING NOT NULL,
  team    STRING,
  country STRING,
  PRIMARY KEY (name) NOT ENFORCED
);
