/*
 * A stand-in for HAMi-core's libvgpu.so where there is no GPU: the e2e tests
 * (buildSharedObject) and `make demo` (hack/demo.sh) build it with
 *   cc -shared -fPIC -o libvgpu.so hami-core-stand-in.c
 * and hand it to share-plugin --memory-limit=hami-core. It is NOT HAMi-core and limits
 * nothing: it only lets the share-plugin's Allocate answer as it does on a GPU node (the
 * library mounted read-only, named in /etc/ld.so.preload, a limit per card in the env), so
 * that what each container gets can be checked. HAMi-core's limits themselves are proven on a
 * GPU by `make gpu-check`.
 */
const char gpushare_hami_core_stand_in[] = "gpushare test stand-in for HAMi-core: limits nothing";
