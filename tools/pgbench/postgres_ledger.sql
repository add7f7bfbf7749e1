-- The ledger's hot path in PostgreSQL, for the side-by-side benchmark (tools/bench): what
-- hotledger's transfers do (insert the immutable transfer, check ledgers and limits, update
-- both balances, all in the transfer's transaction), as a plpgsql trigger on `transfers`, so
-- that both `CALL transfer(...)` and a multi-row `INSERT INTO transfers` apply it. The tables
-- are hotledger's own, from migrations/0002_ledger.sql: tools/bench runs that file first,
-- without its `WITH (ledger_role = ...)` options, then this file, then loads the accounts.

CREATE OR REPLACE FUNCTION apply_transfer() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    d accounts;
    c accounts;
BEGIN
    IF NEW.amount < 0 THEN
        RAISE EXCEPTION 'transfer %: amount must not be negative', NEW.id USING ERRCODE = '23514';
    END IF;
    IF NEW.debit_account_id = NEW.credit_account_id THEN
        RAISE EXCEPTION 'transfer %: debit and credit account are the same', NEW.id USING ERRCODE = '23514';
    END IF;
    -- Row locks in account id order, so concurrent multi-row inserts cannot deadlock.
    IF NEW.debit_account_id < NEW.credit_account_id THEN
        UPDATE accounts SET debits_posted = debits_posted + NEW.amount
         WHERE id = NEW.debit_account_id RETURNING * INTO d;
        UPDATE accounts SET credits_posted = credits_posted + NEW.amount
         WHERE id = NEW.credit_account_id RETURNING * INTO c;
    ELSE
        UPDATE accounts SET credits_posted = credits_posted + NEW.amount
         WHERE id = NEW.credit_account_id RETURNING * INTO c;
        UPDATE accounts SET debits_posted = debits_posted + NEW.amount
         WHERE id = NEW.debit_account_id RETURNING * INTO d;
    END IF;
    IF d.id IS NULL THEN
        RAISE EXCEPTION 'transfer %: debit account % does not exist', NEW.id, NEW.debit_account_id
            USING ERRCODE = '23503';
    END IF;
    IF c.id IS NULL THEN
        RAISE EXCEPTION 'transfer %: credit account % does not exist', NEW.id, NEW.credit_account_id
            USING ERRCODE = '23503';
    END IF;
    IF d.ledger <> c.ledger OR d.ledger <> NEW.ledger THEN
        RAISE EXCEPTION 'transfer %: ledgers differ', NEW.id USING ERRCODE = '23514';
    END IF;
    IF d.debits_must_not_exceed_credits AND d.debits_pending + d.debits_posted > d.credits_posted THEN
        RAISE EXCEPTION 'transfer %: account % would exceed its credits', NEW.id, d.id USING ERRCODE = '23514';
    END IF;
    IF c.credits_must_not_exceed_debits AND c.credits_pending + c.credits_posted > c.debits_posted THEN
        RAISE EXCEPTION 'transfer %: account % would exceed its debits', NEW.id, c.id USING ERRCODE = '23514';
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER transfers_apply BEFORE INSERT ON transfers
    FOR EACH ROW EXECUTE FUNCTION apply_transfer();

CREATE OR REPLACE PROCEDURE transfer(p_id BIGINT, p_debit BIGINT, p_credit BIGINT,
                                     p_amount BIGINT, p_ledger INT, p_code INT)
LANGUAGE sql AS $$
    INSERT INTO transfers (id, debit_account_id, credit_account_id, amount, ledger, code)
    VALUES (p_id, p_debit, p_credit, p_amount, p_ledger, p_code);
$$;
