/*
 * test_agentproto.c - the agent protocol's requests, end to end on a socketpair: each typed
 * call of brigd's client (agentc/) sends exactly the bytes docs/protocol.md shows (and brigd
 * sent before the calls were typed), the agent's decoder takes them, and the client reads the
 * agent's answers into what its callers render.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agentc/agentc.h"
#include "agentproto.h"

static int sp[2]; /* sp[0]: brigd's end; sp[1]: the agent's */

static int open_pair(void **state)
{
    (void)state;
    return socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp);
}

static int close_pair(void **state)
{
    (void)state;
    close(sp[0]);
    close(sp[1]);
    return 0;
}

/* Queues one CONTROL message of the agent, read by the call that follows. */
static void agent_says(const char *json)
{
    json_t *m = json_loads(json, 0, NULL);
    assert_non_null(m);
    assert_int_equal(brig_frame_write_json(sp[1], BRIG_FRAME_CONTROL, m, NULL), 0);
    json_decref(m);
}

static void agent_sends_data(const char *bytes)
{
    assert_int_equal(brig_frame_write(sp[1], BRIG_FRAME_DATA, 0, bytes, strlen(bytes), NULL), 0);
}

/* The request brigd sent must be these bytes, and the agent's decoder must take it. */
static void agent_got(const char *want, brig_agent_op op)
{
    brig_frame f = {0};
    assert_int_equal(brig_frame_read(sp[1], &f, NULL, NULL), 0);
    assert_int_equal(f.hdr.type, BRIG_FRAME_CONTROL);
    if (f.hdr.len != strlen(want) || memcmp(f.payload, want, f.hdr.len) != 0)
        fail_msg("sent %.*s, want %s", (int)f.hdr.len, (const char *)f.payload, want);
    json_t *j = NULL;
    assert_int_equal(brig_frame_parse_json(f.payload, f.hdr.len, &j, NULL), 0);
    brig_agent_req q;
    brig_error *err = NULL;
    if (brig_agentproto_decode(j, &q, &err) < 0)
        fail_msg("%s: %s", want, err->msg);
    assert_int_equal(q.op, op);
    json_decref(j);
    brig_frame_dispose(&f);
}

static void test_files(void **state)
{
    (void)state;
    brig_error *err = NULL;
    json_t *j = NULL;

    agent_says("{\"type\":\"entry\",\"entry\":{\"name\":\"b\",\"type\":\"file\",\"size\":1}}");
    assert_int_equal(brig_agentc_stat(sp[0], "/tmp/b\xff", &j, &err), 0);
    agent_got("{\"op\":\"stat\",\"path_b64\":\"L3RtcC9i/w==\"}", BRIG_OP_STAT);
    assert_string_equal(json_string_value(json_object_get(j, "name")), "b");
    json_decref(j);

    agent_says("{\"type\":\"entries\",\"entries\":[{\"name\":\"a\"},{\"name\":\"b\"}]}");
    agent_says("{\"type\":\"entries\",\"entries\":[{\"name\":\"c\"}]}");
    agent_says("{\"type\":\"end\"}");
    assert_int_equal(brig_agentc_list_dir(sp[0], "/tmp", &j, &err), 0);
    agent_got("{\"op\":\"list_dir\",\"path\":\"/tmp\"}", BRIG_OP_LIST_DIR);
    assert_int_equal(json_array_size(j), 3);
    assert_string_equal(json_string_value(json_object_get(json_array_get(j, 2), "name")), "c");
    json_decref(j);

    agent_says("{\"type\":\"ok\"}");
    assert_int_equal(brig_agentc_remove(sp[0], "/tmp/x", true, &err), 0);
    agent_got("{\"op\":\"remove\",\"path\":\"/tmp/x\",\"recursive\":true}", BRIG_OP_REMOVE);

    agent_says("{\"type\":\"ok\"}");
    assert_int_equal(brig_agentc_move(sp[0], "/a", "/b", &err), 0);
    agent_got("{\"op\":\"move\",\"from\":\"/a\",\"to\":\"/b\"}", BRIG_OP_MOVE);

    agent_says("{\"type\":\"error\",\"code\":\"exists\",\"message\":\"/tmp/d exists\"}");
    assert_int_equal(brig_agentc_mkdir(sp[0], "/tmp/d", 0755, false, &err), -1);
    agent_got("{\"op\":\"mkdir\",\"path\":\"/tmp/d\",\"mode\":493,\"parents\":false}",
              BRIG_OP_MKDIR);
    assert_int_equal(err->kind, BRIG_E_CONFLICT);
    assert_string_equal(err->msg, "/tmp/d exists");
    brig_error_clear(&err);
}

static void test_streams(void **state)
{
    (void)state;
    brig_error *err = NULL;
    int64_t n = 0;
    int mode = 0;

    assert_int_equal(brig_agentc_write_begin(sp[0], "/x", -1, &err), 0);
    agent_got("{\"op\":\"write_file\",\"path\":\"/x\"}", BRIG_OP_WRITE_FILE);
    assert_int_equal(brig_agentc_write_begin(sp[0], "/x", 0600, &err), 0);
    agent_got("{\"op\":\"write_file\",\"path\":\"/x\",\"mode\":384}", BRIG_OP_WRITE_FILE);
    assert_int_equal(brig_agentc_tar_extract_begin(sp[0], "/d", &err), 0);
    agent_got("{\"op\":\"tar_extract\",\"path\":\"/d\"}", BRIG_OP_TAR_EXTRACT);
    assert_int_equal(brig_agentc_proc_stdin_begin(sp[0], 42, &err), 0);
    agent_got("{\"op\":\"proc_stdin\",\"pid\":42}", BRIG_OP_PROC_STDIN);
    agent_says("{\"type\":\"ok\",\"bytes\":3}");
    assert_int_equal(brig_agentc_write_chunk(sp[0], "abc", 3, &err), 0);
    assert_int_equal(brig_agentc_write_end(sp[0], &n, &err), 0);
    assert_int_equal(n, 3);
    brig_frame f = {0};
    assert_int_equal(brig_frame_read(sp[1], &f, NULL, NULL), 0);
    assert_true(f.hdr.type == BRIG_FRAME_DATA && f.hdr.len == 3 && f.hdr.chan == BRIG_CHAN_IN);
    assert_int_equal(brig_frame_read(sp[1], &f, NULL, NULL), 0);
    assert_true(f.hdr.type == BRIG_FRAME_DATA && f.hdr.len == 0);

    agent_says("{\"type\":\"file\",\"size\":2,\"mode\":420}");
    assert_int_equal(brig_agentc_read_begin(sp[0], "/x", &n, &mode, &err), 0);
    agent_got("{\"op\":\"read_file\",\"path\":\"/x\"}", BRIG_OP_READ_FILE);
    assert_int_equal(n, 2);
    assert_int_equal(mode, 0644);

    agent_says("{\"type\":\"tar\"}");
    agent_sends_data("t");
    agent_sends_data("");
    agent_says("{\"type\":\"error\",\"code\":\"io\",\"message\":\"tar: failed\"}");
    assert_int_equal(brig_agentc_tar_create_begin(sp[0], "/d", &err), 0);
    agent_got("{\"op\":\"tar_create\",\"path\":\"/d\"}", BRIG_OP_TAR_CREATE);
    assert_int_equal(brig_agentc_read_chunk(sp[0], &f, &err), 1);
    assert_int_equal(brig_agentc_read_chunk(sp[0], &f, &err), 0);
    assert_int_equal(brig_agentc_tar_create_end(sp[0], &f, &err), -1);
    assert_string_equal(err->msg, "tar: failed");
    brig_error_clear(&err);
    brig_frame_dispose(&f);
}

static void test_procs(void **state)
{
    (void)state;
    brig_error *err = NULL;
    json_t *j = NULL;

    agent_says("{\"type\":\"processes\",\"processes\":[{\"pid\":7,\"running\":true}]}");
    assert_int_equal(brig_agentc_proc_list(sp[0], &j, &err), 0);
    agent_got("{\"op\":\"proc_list\"}", BRIG_OP_PROC_LIST);
    assert_int_equal(json_array_size(j), 1);
    json_decref(j);

    agent_says("{\"type\":\"process\",\"pid\":42,\"running\":false}");
    assert_int_equal(brig_agentc_proc_get(sp[0], 42, &j, &err), 0);
    agent_got("{\"op\":\"proc_get\",\"pid\":42}", BRIG_OP_PROC_GET);
    assert_null(json_object_get(j, "type"));
    assert_int_equal(json_integer_value(json_object_get(j, "pid")), 42);
    json_decref(j);

    agent_says("{\"type\":\"process\",\"pid\":42,\"running\":true}");
    assert_int_equal(brig_agentc_proc_wait(sp[0], 42, 5000, &j, &err), 0);
    agent_got("{\"op\":\"proc_wait\",\"pid\":42,\"timeout_ms\":5000}", BRIG_OP_PROC_WAIT);
    json_decref(j);

    agent_says("{\"type\":\"ok\"}");
    assert_int_equal(brig_agentc_proc_signal(sp[0], 42, 15, &err), 0);
    agent_got("{\"op\":\"proc_signal\",\"pid\":42,\"signal\":15}", BRIG_OP_PROC_SIGNAL);

    agent_says("{\"type\":\"ok\"}");
    assert_int_equal(brig_agentc_proc_resize(sp[0], 42, 100, 30, &err), 0);
    agent_got("{\"op\":\"proc_resize\",\"pid\":42,\"cols\":100,\"rows\":30}", BRIG_OP_PROC_RESIZE);

    agent_says("{\"type\":\"error\",\"code\":\"not_found\",\"message\":\"no process 42\"}");
    assert_int_equal(brig_agentc_proc_stdin_close(sp[0], 42, &err), -1);
    agent_got("{\"op\":\"proc_stdin_close\",\"pid\":42}", BRIG_OP_PROC_STDIN_CLOSE);
    assert_int_equal(err->kind, BRIG_E_NOT_FOUND);
    brig_error_clear(&err);

    assert_int_equal(brig_agentc_proc_output(sp[0], 42, true, &err), 0);
    agent_got("{\"op\":\"proc_output\",\"pid\":42,\"follow\":true}", BRIG_OP_PROC_OUTPUT);
}

static void test_exec(void **state)
{
    (void)state;
    brig_error *err = NULL;
    brig_exec_result res;
    json_t *argv = json_pack("[s, s]", "ls", "-l"), *env = json_pack("{s:s}", "A", "b");
    brig_exec_req full = {.argv = argv,
                          .cmd = "ignored",
                          .cwd = "/root",
                          .env = env,
                          .timeout_ms = 55000,
                          .user = "user",
                          .pty_cols = 80,
                          .pty_rows = 24,
                          .background = true,
                          .buffer_bytes = 4096,
                          .has_stdin = true};
    agent_says("{\"type\":\"started\",\"pid\":7}");
    assert_int_equal(brig_agentc_exec(sp[0], &full, 1024, NULL, &res, &err), 0);
    agent_got("{\"op\":\"exec\",\"timeout_ms\":55000,\"argv\":[\"ls\",\"-l\"],\"cwd\":\"/root\","
              "\"env\":{\"A\":\"b\"},\"user\":\"user\",\"pty\":{\"cols\":80,\"rows\":24},"
              "\"background\":true,\"buffer_bytes\":4096,\"stdin\":true}",
              BRIG_OP_EXEC);
    assert_int_equal(res.pid, 7);
    brig_exec_result_dispose(&res);
    json_decref(argv);
    json_decref(env);
}

static void test_exec_output(void **state)
{
    (void)state;
    brig_error *err = NULL;
    brig_exec_result res;
    brig_exec_req plain = {.cmd = "echo hi"};
    agent_says("{\"type\":\"started\",\"pid\":8}");
    assert_int_equal(brig_frame_write(sp[1], BRIG_FRAME_DATA, 1, "hi\n", 3, NULL), 0);
    assert_int_equal(brig_frame_write(sp[1], BRIG_FRAME_DATA, 1, NULL, 0, NULL), 0);
    agent_says("{\"type\":\"exit\",\"exit_code\":0,\"signal\":null,\"timed_out\":false,"
               "\"duration_ms\":3}");
    assert_int_equal(brig_agentc_exec(sp[0], &plain, 1024, NULL, &res, &err), 0);
    agent_got("{\"op\":\"exec\",\"timeout_ms\":0,\"cmd\":\"echo hi\"}", BRIG_OP_EXEC);
    assert_int_equal(res.out.len, 3);
    assert_int_equal(res.duration_ms, 3);
    brig_exec_result_dispose(&res);
}

/* A background exec that asks to follow: on the same connection only when the agent says so
 * (an older agent answers a plain `started`). */
static void test_exec_follow(void **state)
{
    (void)state;
    brig_error *err = NULL;
    brig_exec_result res;
    brig_exec_req bg = {.cmd = "true", .background = true, .follow = true, .stdin_closed = true};
    agent_says("{\"type\":\"started\",\"pid\":9,\"follow\":true}");
    assert_int_equal(brig_agentc_exec(sp[0], &bg, 0, NULL, &res, &err), 0);
    agent_got("{\"op\":\"exec\",\"timeout_ms\":0,\"cmd\":\"true\",\"background\":true,"
              "\"follow\":true,\"stdin_closed\":true}",
              BRIG_OP_EXEC);
    assert_int_equal(res.pid, 9);
    assert_true(res.following);
    brig_exec_result_dispose(&res);
    agent_says("{\"type\":\"started\",\"pid\":10}");
    assert_int_equal(brig_agentc_exec(sp[0], &bg, 0, NULL, &res, &err), 0);
    agent_got("{\"op\":\"exec\",\"timeout_ms\":0,\"cmd\":\"true\",\"background\":true,"
              "\"follow\":true,\"stdin_closed\":true}",
              BRIG_OP_EXEC);
    assert_false(res.following);
    brig_exec_result_dispose(&res);
}

/* Every name is the table's: op and message names decode to themselves. */
static void test_names(void **state)
{
    (void)state;
    for (int t = 1; t < BRIG_REPLY__COUNT; t++) {
        json_t *m = brig_agentproto_message((brig_agent_reply)t);
        assert_int_equal(brig_agentproto_reply_type(m), t);
        json_decref(m);
    }
    json_t *odd = json_pack("{s:s}", "type", "nonsense");
    assert_int_equal(brig_agentproto_reply_type(odd), BRIG_REPLY_UNKNOWN);
    json_decref(odd);
    for (int op = 0; op < BRIG_OP__COUNT; op++) {
        json_t *j =
            json_pack("{s:s, s:s, s:s, s:s}", "op", brig_agentproto_op_name((brig_agent_op)op),
                      "path", "/p", "from", "/a", "to", "/b");
        brig_agent_req q;
        brig_error *err = NULL;
        int rc = brig_agentproto_decode(j, &q, &err);
        /* The ops that need more than paths say so; none is unknown. */
        if (rc < 0) {
            assert_null(strstr(err->msg, "unknown op"));
            brig_error_clear(&err);
        } else {
            assert_int_equal(q.op, op);
        }
        json_decref(j);
    }
    assert_string_equal(brig_agentproto_op_name(BRIG_OP__COUNT), "?");
}

/* guest_sync: what the agent checks before it touches the guest's clock or link. */
static void test_guest_sync(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "{\"op\":\"guest_sync\"}",
        "{\"op\":\"guest_sync\",\"realtime_ns\":0}",
        "{\"op\":\"guest_sync\",\"realtime_ns\":5,\"seed\":\"abc\"}",
        "{\"op\":\"guest_sync\",\"realtime_ns\":5,\"net\":{\"nic\":\"52:54:00:00:00:02\"}}",
        "{\"op\":\"guest_sync\",\"realtime_ns\":5,\"net\":{\"nic\":\"52:54:00:00:00:02\","
        "\"mac\":\"02:00:00:00:00:0G\",\"ip\":\"10.0.0.1\",\"gw\":\"10.0.0.0\"}}",
        "{\"op\":\"guest_sync\",\"realtime_ns\":5,\"net\":{\"nic\":\"52:54:00:00:00:02\","
        "\"mac\":\"02:00:00:00:00:01\",\"ip\":\"10.0.0.256\",\"gw\":\"10.0.0.0\"}}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        json_t *j = json_loads(bad[i], 0, NULL);
        brig_agent_req q;
        brig_error *err = NULL;
        assert_int_equal(brig_agentproto_decode(j, &q, &err), -1);
        assert_int_equal(err->kind, BRIG_E_INVALID);
        brig_error_clear(&err);
        json_decref(j);
    }
    const char *good = "{\"op\":\"guest_sync\",\"realtime_ns\":1764583200123456789,\"seed\":"
                       "\"00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\","
                       "\"net\":{\"nic\":\"52:54:00:00:00:02\",\"mac\":\"02:42:0a:00:00:03\","
                       "\"ip\":\"10.0.0.3\",\"gw\":\"10.0.0.2\"}}";
    json_t *j = json_loads(good, 0, NULL);
    brig_agent_req q;
    brig_error *err = NULL;
    assert_int_equal(brig_agentproto_decode(j, &q, &err), 0);
    assert_int_equal(q.op, BRIG_OP_GUEST_SYNC);
    assert_true(q.u.guest.realtime_ns == 1764583200123456789LL && q.u.guest.net);
    assert_string_equal(q.u.guest.ip, "10.0.0.3");
    json_t *back = brig_agentproto_encode(&q);
    assert_true(json_equal(back, j));
    json_decref(back);
    json_decref(j);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN); /* as in brigd: a write to a closed peer is EPIPE */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_files, open_pair, close_pair),
        cmocka_unit_test_setup_teardown(test_streams, open_pair, close_pair),
        cmocka_unit_test_setup_teardown(test_procs, open_pair, close_pair),
        cmocka_unit_test_setup_teardown(test_exec, open_pair, close_pair),
        cmocka_unit_test_setup_teardown(test_exec_output, open_pair, close_pair),
        cmocka_unit_test_setup_teardown(test_exec_follow, open_pair, close_pair),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_guest_sync),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
