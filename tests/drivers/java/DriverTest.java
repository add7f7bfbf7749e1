// pgJDBC against hotledger: connect, DDL, parameters, transactions, SQLSTATE, prepared
// statement reuse (server-side after five executions), executeBatch, java.util.UUID
// parameters and results, enum labels as untyped parameters, DatabaseMetaData (tables, columns,
// primary keys, indexes, imported and exported keys, types). Run by server/tests/drivers.rs.
import java.sql.Connection;
import java.sql.DatabaseMetaData;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.sql.Types;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.UUID;

public class DriverTest {
    static void check(boolean ok, String message) {
        if (!ok) {
            System.err.println("FAILED: " + message);
            System.exit(1);
        }
    }

    public static void main(String[] args) throws Exception {
        String url = "jdbc:postgresql://127.0.0.1:" + System.getenv("HOTLEDGER_PORT") + "/ledger";
        Properties props = new Properties();
        props.setProperty("user", "ledger");
        props.setProperty("password", System.getenv("HOTLEDGER_PASSWORD"));
        try (Connection conn = DriverManager.getConnection(url, props)) {
            try (Statement s = conn.createStatement()) {
                s.execute("create table java_items (id bigint primary key, name text not null, qty int default 0)");
            }
            try (PreparedStatement insert = conn.prepareStatement("insert into java_items (id, name, qty) values (?, ?, ?)")) {
                for (int i = 1; i <= 10; i++) {
                    insert.setLong(1, i);
                    insert.setString(2, "item " + i);
                    insert.setInt(3, i * 3);
                    check(insert.executeUpdate() == 1, "insert count");
                }
                for (int i = 11; i <= 30; i++) {
                    insert.setLong(1, i);
                    insert.setString(2, "batch " + i);
                    insert.setInt(3, 0);
                    insert.addBatch();
                }
                int[] counts = insert.executeBatch();
                check(counts.length == 20, "batch returned " + counts.length + " counts");
            }
            try (PreparedStatement select = conn.prepareStatement("select name, qty from java_items where id = ?")) {
                for (int i = 0; i < 20; i++) {
                    int id = 1 + i % 10;
                    select.setLong(1, id);
                    try (ResultSet rs = select.executeQuery()) {
                        check(rs.next(), "no row for " + id);
                        check(rs.getString(1).equals("item " + id), "name " + rs.getString(1));
                        check(rs.getInt(2) == id * 3, "qty " + rs.getInt(2));
                    }
                }
            }
            try (Statement s = conn.createStatement(); ResultSet rs = s.executeQuery("select sum(qty), count(*) from java_items")) {
                check(rs.next() && rs.getLong(1) == 165 && rs.getLong(2) == 30, "sum and count");
            }

            conn.setAutoCommit(false);
            try (Statement s = conn.createStatement()) {
                s.executeUpdate("update java_items set qty = qty + 100 where id = 1");
                conn.rollback();
                s.executeUpdate("update java_items set qty = qty + 1000 where id = 2");
                conn.commit();
            }
            conn.setAutoCommit(true);
            try (Statement s = conn.createStatement(); ResultSet rs = s.executeQuery("select qty from java_items where id in (1, 2) order by id")) {
                check(rs.next() && rs.getInt(1) == 3, "rollback kept a change");
                check(rs.next() && rs.getInt(1) == 1006, "commit lost a change");
            }

            // A failed statement fails the whole transaction: pgJDBC (autocommit off) sends BEGIN
            // with the first statement; after the failure every statement gets 25P02 and the
            // commit keeps nothing. A batch outside a transaction is one transaction as well.
            try (Statement s = conn.createStatement()) {
                s.execute("create table java_atomic (id int primary key)");
            }
            conn.setAutoCommit(false);
            try (PreparedStatement insert = conn.prepareStatement("insert into java_atomic values (?)")) {
                insert.setInt(1, 1);
                insert.executeUpdate();
                try (PreparedStatement bad = conn.prepareStatement("select * from no_such_table where id = ?")) {
                    bad.setInt(1, 1);
                    bad.executeQuery();
                    check(false, "a missing table did not fail");
                } catch (SQLException e) {
                    check("42P01".equals(e.getSQLState()), "missing table: " + e.getSQLState());
                }
                insert.setInt(1, 2);
                try {
                    insert.executeUpdate();
                    check(false, "a statement after the failure ran");
                } catch (SQLException e) {
                    check("25P02".equals(e.getSQLState()), "after the failure: " + e.getSQLState());
                }
                conn.commit();
            }
            conn.setAutoCommit(true);
            try (PreparedStatement insert = conn.prepareStatement("insert into java_atomic values (?)")) {
                for (int id : new int[] {3, 4, 3, 5}) {
                    insert.setInt(1, id);
                    insert.addBatch();
                }
                insert.executeBatch();
                check(false, "a batch with a duplicate key did not fail");
            } catch (SQLException e) {
                check(e.getSQLState() != null && e.getSQLState().equals("23505") || e.getNextException() != null && "23505".equals(e.getNextException().getSQLState()), "batch: " + e.getSQLState());
            }
            try (Statement s = conn.createStatement(); ResultSet rs = s.executeQuery("select count(*) from java_atomic")) {
                check(rs.next() && rs.getLong(1) == 0, "a failed transaction or batch left rows: " + rs.getLong(1));
            }

            try (Statement s = conn.createStatement()) {
                s.executeUpdate("insert into java_items (id, name) values (1, 'dup')");
                check(false, "duplicate key did not fail");
            } catch (SQLException e) {
                check("23505".equals(e.getSQLState()), "sqlstate " + e.getSQLState());
            }
            try (Statement s = conn.createStatement()) {
                s.executeQuery("select * from no_such_table");
                check(false, "unknown table did not fail");
            } catch (SQLException e) {
                check("42P01".equals(e.getSQLState()), "sqlstate " + e.getSQLState());
            }
            try (Statement s = conn.createStatement(); ResultSet rs = s.executeQuery("select count(*) from java_items")) {
                check(rs.next() && rs.getLong(1) == 30, "rows after errors");
            }

            // uuid: java.util.UUID parameters and results (pgJDBC sends and reads them in
            // binary), prepared server-side after five executions, and a drawn default.
            try (Statement s = conn.createStatement()) {
                s.execute("create table java_tokens (id uuid primary key default gen_random_uuid(), n int not null)");
            }
            List<UUID> ids = new ArrayList<>();
            try (PreparedStatement insert = conn.prepareStatement("insert into java_tokens (id, n) values (?, ?)")) {
                for (int i = 0; i < 8; i++) {
                    ids.add(UUID.randomUUID());
                    insert.setObject(1, ids.get(i));
                    insert.setInt(2, i);
                    insert.executeUpdate();
                }
            }
            try (PreparedStatement select = conn.prepareStatement("select id, n from java_tokens where id = ?")) {
                for (int i = 0; i < 8; i++) {
                    select.setObject(1, ids.get(i));
                    try (ResultSet rs = select.executeQuery()) {
                        check(rs.next() && ids.get(i).equals(rs.getObject(1)) && rs.getInt(2) == i, "uuid row " + i);
                    }
                }
            }
            try (Statement s = conn.createStatement(); ResultSet rs = s.executeQuery("insert into java_tokens (n) values (100) returning id")) {
                check(rs.next() && ((UUID) rs.getObject(1)).version() == 4, "a drawn uuid");
            }

            // An enum type: a label goes as setObject(i, label, Types.OTHER) (untyped), as in
            // PostgreSQL, where setString's varchar is refused (42804); read with getString.
            try (Statement s = conn.createStatement()) {
                s.execute("create type java_level as enum ('low', 'mid', 'high')");
                s.execute("create table java_alerts (id int primary key, level java_level not null)");
            }
            try (PreparedStatement insert = conn.prepareStatement("insert into java_alerts values (?, ?)")) {
                String[] levels = {"high", "low", "mid"};
                for (int i = 0; i < levels.length; i++) {
                    insert.setInt(1, i);
                    insert.setObject(2, levels[i], Types.OTHER);
                    insert.executeUpdate();
                }
                insert.setInt(1, 9);
                insert.setString(2, "low");
                try {
                    insert.executeUpdate();
                    check(false, "a varchar parameter went into an enum column");
                } catch (SQLException e) {
                    check("42804".equals(e.getSQLState()), "varchar into enum: " + e.getSQLState());
                }
            }
            try (Statement s = conn.createStatement(); ResultSet rs = s.executeQuery("select string_agg(level::text, ',' order by level) from java_alerts")) {
                check(rs.next() && "low,mid,high".equals(rs.getString(1)), "enum order");
            }
            try (Statement s = conn.createStatement(); ResultSet rs = s.executeQuery("select level from java_alerts where id = 0")) {
                check(rs.next() && "high".equals(rs.getString(1)), "an enum label read back");
            }

            // Advisory locks, as Flyway takes its migration lock.
            try (PreparedStatement lock = conn.prepareStatement("select pg_try_advisory_lock(?)")) {
                lock.setLong(1, 77L);
                try (ResultSet rs = lock.executeQuery()) {
                    check(rs.next() && rs.getBoolean(1), "advisory lock not taken");
                }
            }
            try (Statement s = conn.createStatement(); ResultSet rs = s.executeQuery("select pg_advisory_unlock(77)")) {
                check(rs.next() && rs.getBoolean(1), "advisory lock not given back");
            }

            // DatabaseMetaData, as Hibernate's schema tools and IDEs read a schema: tables,
            // columns and foreign keys from either end (a nine-catalog join each).
            try (Statement s = conn.createStatement()) {
                s.execute("create table java_parent (id int primary key, code text unique)");
                s.execute("create table java_child (id int primary key, parent_id int references java_parent (id))");
            }
            DatabaseMetaData meta = conn.getMetaData();
            try (ResultSet rs = meta.getTables(null, "public", "java_%", new String[] {"TABLE"})) {
                int tables = 0;
                while (rs.next()) {
                    tables++;
                }
                check(tables >= 2, "getTables found " + tables);
            }
            try (ResultSet rs = meta.getColumns(null, "public", "java_child", "%")) {
                check(rs.next() && "id".equals(rs.getString("COLUMN_NAME")), "getColumns");
                check(rs.next() && "parent_id".equals(rs.getString("COLUMN_NAME")) && rs.getInt("DATA_TYPE") == Types.INTEGER, "getColumns type");
            }
            try (ResultSet rs = meta.getImportedKeys(null, "public", "java_child")) {
                check(rs.next(), "getImportedKeys found nothing");
                check("java_parent".equals(rs.getString("PKTABLE_NAME")) && "id".equals(rs.getString("PKCOLUMN_NAME"))
                        && "parent_id".equals(rs.getString("FKCOLUMN_NAME")) && "java_parent_pkey".equals(rs.getString("PK_NAME")),
                        "getImportedKeys: " + rs.getString("PKTABLE_NAME") + "." + rs.getString("PKCOLUMN_NAME") + " " + rs.getString("PK_NAME"));
                check(!rs.next(), "one imported key");
            }
            try (ResultSet rs = meta.getExportedKeys(null, "public", "java_parent")) {
                check(rs.next() && "java_child".equals(rs.getString("FKTABLE_NAME")), "getExportedKeys");
            }
            // The primary key and indexes, through information_schema._pg_expandarray.
            try (Statement s = conn.createStatement()) {
                s.execute("create table java_pair (b text, a int, c int, primary key (b, a))");
                s.execute("create index java_pair_c_b on java_pair (c, b)");
            }
            try (ResultSet rs = meta.getPrimaryKeys(null, "public", "java_pair")) {
                check(rs.next() && "b".equals(rs.getString("COLUMN_NAME")) && rs.getInt("KEY_SEQ") == 1
                        && "java_pair_pkey".equals(rs.getString("PK_NAME")), "getPrimaryKeys first");
                check(rs.next() && "a".equals(rs.getString("COLUMN_NAME")) && rs.getInt("KEY_SEQ") == 2, "getPrimaryKeys second");
                check(!rs.next(), "two key columns");
            }
            List<String> indexColumns = new ArrayList<>();
            try (ResultSet rs = meta.getIndexInfo(null, "public", "java_pair", false, false)) {
                while (rs.next()) {
                    indexColumns.add(rs.getString("INDEX_NAME") + ":" + rs.getShort("ORDINAL_POSITION") + ":"
                            + rs.getString("COLUMN_NAME") + ":" + rs.getBoolean("NON_UNIQUE"));
                }
            }
            check(indexColumns.equals(List.of("java_pair_pkey:1:b:false", "java_pair_pkey:2:a:false",
                    "java_pair_c_b:1:c:true", "java_pair_c_b:2:b:true")), "getIndexInfo: " + indexColumns);
            List<String> types = new ArrayList<>();
            try (ResultSet rs = meta.getTypeInfo()) {
                while (rs.next()) {
                    types.add(rs.getString("TYPE_NAME") + ":" + rs.getInt("DATA_TYPE"));
                }
            }
            check(types.contains("int4:" + Types.INTEGER) && types.contains("text:" + Types.VARCHAR)
                    && types.contains("_int4:" + Types.ARRAY), "getTypeInfo: " + types);
        }
        System.out.println("pgJDBC: ok");
    }
}
