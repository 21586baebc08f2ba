/*
 * test_nfset.c - set element keys laid out as nftables lays them out (src/brigd/net/nfset.c):
 * the bytes `nft --debug=netlink add element` sends for the same elements of fw.c's sets.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <arpa/inet.h>
#include <cmocka.h>
#include <string.h>

#include "net/nfset.h"

/* "brg12345" . 10.1.2.3 (set sb_src: ifname . ipv4_addr): nft sends
 * 31677262 35343332 00000000 00000000 0302010a (words as the host reads them). */
static void test_ifname_and_address(void **state)
{
    (void)state;
    brig_nfkey k = {0};
    brig_nfkey_ifname(&k, "brg12345");
    brig_nfkey_ip4(&k, inet_addr("10.1.2.3"));
    static const uint8_t want[20] = {'b', 'r', 'g', '1', '2', '3', '4', '5', [16] = 10, 1, 2, 3};
    assert_int_equal(k.len, 20);
    assert_memory_equal(k.b, want, 20);
}

/* "brg12345" . 443 (sb_ports: ifname . inet_service): the port in network order, then two
 * bytes of padding (0000bb01). */
static void test_port_is_padded(void **state)
{
    (void)state;
    brig_nfkey k = {0};
    brig_nfkey_ifname(&k, "brg12345");
    brig_nfkey_port(&k, 443);
    static const uint8_t port[4] = {0x01, 0xbb, 0, 0};
    assert_int_equal(k.len, 20);
    assert_memory_equal(k.b + 16, port, 4);
}

/* A mark (live, sb_gen's value) is in host byte order (00000102 for 0x102). */
static void test_mark_is_host_order(void **state)
{
    (void)state;
    brig_nfkey k = {0};
    brig_nfkey_mark(&k, 0x102);
    uint32_t v;
    assert_int_equal(k.len, 4);
    memcpy(&v, k.b, 4);
    assert_int_equal(v, 0x102);
}

/* A name is at most IFNAMSIZ - 1 bytes and always ends in a zero. */
static void test_long_name_is_cut(void **state)
{
    (void)state;
    brig_nfkey k = {0};
    brig_nfkey_ifname(&k, "abcdefghijklmnopqrstuvwxyz");
    assert_int_equal(k.len, 16);
    assert_memory_equal(k.b, "abcdefghijklmno", 16);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ifname_and_address),
        cmocka_unit_test(test_port_is_padded),
        cmocka_unit_test(test_mark_is_host_order),
        cmocka_unit_test(test_long_name_is_cut),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
