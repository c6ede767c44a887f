// SPDX-License-Identifier: GPL-2.0
// Requests a firmware file at init, logs its size and first bytes and releases it.
// Init fails with request_firmware()'s error when the file is missing, so tests can
// tell "firmware staged where the kernel looks" from "not".
#include <linux/firmware.h>
#include <linux/init.h>
#include <linux/minmax.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/platform_device.h>

static char *fw_name = "kmm_ci_fw/fw.bin";
module_param(fw_name, charp, 0444);
MODULE_PARM_DESC(fw_name, "Firmware file to request (default: kmm_ci_fw/fw.bin)");

static int __init kmm_ci_fw_init(void)
{
	// request_firmware() wants a device for its log lines and firmware cache; a bare
	// platform device without a driver binds nothing.
	struct platform_device *pdev;
	const struct firmware *fw;
	int err;

	pdev = platform_device_register_simple("kmm_ci_fw", PLATFORM_DEVID_NONE, NULL, 0);
	if (IS_ERR(pdev))
		return PTR_ERR(pdev);

	err = request_firmware(&fw, fw_name, &pdev->dev);
	if (err) {
		pr_err("kmm_ci_fw: request_firmware(%s) failed: %d\n", fw_name, err);
		platform_device_unregister(pdev);
		return err;
	}
	pr_info("kmm_ci_fw: firmware %s loaded, size=%zu first=%*phN\n", fw_name,
		fw->size, (int)min_t(size_t, fw->size, 8), fw->data);
	release_firmware(fw);
	platform_device_unregister(pdev);
	return 0;
}

static void __exit kmm_ci_fw_exit(void)
{
	pr_info("kmm_ci_fw: unloaded\n");
}

module_init(kmm_ci_fw_init);
module_exit(kmm_ci_fw_exit);
MODULE_DESCRIPTION("kmodd CI test module that requests firmware");
MODULE_VERSION("1.0.0");
MODULE_LICENSE("GPL");
