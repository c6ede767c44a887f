// SPDX-License-Identifier: GPL-2.0
// The smallest test module: logs on init and exit, and shows its parameters in sysfs
// so tests can check that parameters given at insert time arrived.
#include <linux/init.h>
#include <linux/module.h>
#include <linux/moduleparam.h>

static char *greeting = "hello";
module_param(greeting, charp, 0444);
MODULE_PARM_DESC(greeting, "Word logged at init (default: hello)");

static int count = 1;
module_param(count, int, 0444);
MODULE_PARM_DESC(count, "Integer logged at init (default: 1)");

static int __init kmm_ci_a_init(void)
{
	pr_info("kmm_ci_a: loaded, greeting=%s count=%d\n", greeting, count);
	return 0;
}

static void __exit kmm_ci_a_exit(void)
{
	pr_info("kmm_ci_a: unloaded\n");
}

module_init(kmm_ci_a_init);
module_exit(kmm_ci_a_exit);
MODULE_DESCRIPTION("kmodd CI test module A");
MODULE_VERSION("1.0.0");
MODULE_LICENSE("GPL");
