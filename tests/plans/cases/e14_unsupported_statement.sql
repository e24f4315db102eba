INSERT INTO customers VALUES (1, 'a', 'NL');
