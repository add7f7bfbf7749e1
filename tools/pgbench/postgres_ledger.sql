-- The ledger's hot path in PostgreSQL, for the side-by-side benchmark: a plpgsql procedure
-- doing what hotledger's CALL transfer does (insert the immutable transfer, check ledgers
-- and limits, update both balances) in one transaction, and the accounts. The tables are
-- hotledger's own, from migrations/0002_ledger.sql: tools/pgbench_compare.py runs that file
-- first, without its `WITH (ledger_role = ...)` options.
INSERT INTO accounts (id, ledger, code) SELECT g, 1, 1 FROM generate_series(1, 100001) g;

CREATE OR REPLACE PROCEDURE transfer(p_id BIGINT, p_debit BIGINT, p_credit BIGINT,
                                     p_amount BIGINT, p_ledger INT, p_code INT)
LANGUAGE plpgsql AS $$
DECLARE
    d accounts;
    c accounts;
BEGIN
    IF p_amount <= 0 THEN
        RAISE EXCEPTION 'transfer %: amount must be positive', p_id USING ERRCODE = '23514';
    END IF;
    IF p_debit = p_credit THEN
        RAISE EXCEPTION 'transfer %: debit and credit account are the same', p_id USING ERRCODE = '23514';
    END IF;
    INSERT INTO transfers (id, debit_account_id, credit_account_id, amount, ledger, code)
    VALUES (p_id, p_debit, p_credit, p_amount, p_ledger, p_code);
    UPDATE accounts SET debits_posted = debits_posted + p_amount WHERE id = p_debit RETURNING * INTO d;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'transfer %: debit account % does not exist', p_id, p_debit USING ERRCODE = '23503';
    END IF;
    UPDATE accounts SET credits_posted = credits_posted + p_amount WHERE id = p_credit RETURNING * INTO c;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'transfer %: credit account % does not exist', p_id, p_credit USING ERRCODE = '23503';
    END IF;
    IF d.ledger <> c.ledger OR d.ledger <> p_ledger THEN
        RAISE EXCEPTION 'transfer %: ledgers differ', p_id USING ERRCODE = '23514';
    END IF;
    IF d.debits_must_not_exceed_credits AND d.debits_pending + d.debits_posted > d.credits_posted THEN
        RAISE EXCEPTION 'transfer %: account % would exceed its credits', p_id, p_debit USING ERRCODE = '23514';
    END IF;
    IF c.credits_must_not_exceed_debits AND c.credits_pending + c.credits_posted > c.debits_posted THEN
        RAISE EXCEPTION 'transfer %: account % would exceed its debits', p_id, p_credit USING ERRCODE = '23514';
    END IF;
END $$;
VACUUM ANALYZE;
