// SPDX-License-Identifier: GPL-2.0
// Uses kmm_ci_dep_base's export: inserting it before the base fails with
// "Unknown symbol kmm_ci_dep_base_value".
#include <linux/init.h>
#include <linux/module.h>

int kmm_ci_dep_base_value(void);

static int __init kmm_ci_dep_user_init(void)
{
	pr_info("kmm_ci_dep_user: loaded, base value=%d\n", kmm_ci_dep_base_value());
	return 0;
}

static void __exit kmm_ci_dep_user_exit(void)
{
	pr_info("kmm_ci_dep_user: unloaded\n");
}

module_init(kmm_ci_dep_user_init);
module_exit(kmm_ci_dep_user_exit);
MODULE_DESCRIPTION("kmodd CI test module depending on kmm_ci_dep_base");
MODULE_VERSION("1.0.0");
MODULE_LICENSE("GPL");
