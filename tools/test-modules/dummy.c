// SPDX-License-Identifier: GPL-2.0
// Stand-in for the in-tree drivers/net/dummy.ko of the cloud kernel, under the same
// module name, for "replace an in-tree module" tests (KMM's inTreeModulesToRemove).
// It registers no network device: it only logs, so tests can tell it from the
// in-tree driver by its log line and its modinfo version.
#include <linux/init.h>
#include <linux/module.h>
#include <linux/moduleparam.h>

// Same parameter as the in-tree driver, so a configuration written for it still loads.
static int numdummies = 1;
module_param(numdummies, int, 0444);
MODULE_PARM_DESC(numdummies, "Accepted for compatibility with the in-tree dummy; unused");

static int __init kmodd_dummy_init(void)
{
	pr_info("kmodd test dummy loaded\n");
	return 0;
}

static void __exit kmodd_dummy_exit(void)
{
	pr_info("kmodd test dummy unloaded\n");
}

module_init(kmodd_dummy_init);
module_exit(kmodd_dummy_exit);
MODULE_DESCRIPTION("kmodd test replacement for the in-tree dummy network driver");
MODULE_VERSION("kmodd-test-1.0.0");
MODULE_LICENSE("GPL");
