"""The first terms of service and privacy policy, in English and Simplified Chinese, in force at once.

A template, not legal advice: the operator reviews both texts (company name, address, governing law, data
location, contact) and publishes a corrected version from the staff page (/staff/privacy/) before opening
to the public. Each version's text is fixed once published, so the review is a new version.
"""

from django.db import migrations
from django.utils import timezone

NOTE_EN = "[Template: the operator must review this text and fill in the bracketed details before going live.]\n\n"
NOTE_ZH = "【模板：运营方上线前须审阅本文本，并补全方括号中的信息。】\n\n"

TERMS_EN = """1. The service
[Operator name] ("we") rents GPU computing resources (instances, clusters, volumes, one-click app deployments) through this console and its API. These terms apply to every account, personal or team.

2. Your account
You give a working e-mail address (and, where required by law, a mobile number and real-name verification), keep your password, second factor and API tokens secret, and are responsible for what is done with them. Tell us at once if you think your account has been misused.

3. Acceptable use
You may not use the service to break the law, to attack or scan other systems, to send spam, to mine cryptocurrency without our written consent, to host content that is illegal where we operate, or to get around quotas, limits or the one-trial-per-person rule. We may stop an instance that endangers the service or others, and tell you why.

4. Prices, balance and billing
Prices are shown in the console before you launch. Usage is charged per second from your prepaid balance; storage is charged while it exists. When the balance runs out, running machines are stopped and their disks kept for a while. Trial credit has no cash value and expires. Top-ups are refundable as described on the billing page. Invoices (发票) are issued on request for money paid.

5. Your data
What you store on instances and volumes is yours; we do not look at it except to keep the service running or when the law requires it. Releasing an instance or deleting a volume destroys its data for good: keep your own backups. How we handle personal data is set out in the privacy policy.

6. Availability
We aim to keep the service available but do not promise that it never fails. Interruptible instances may be stopped at any time for on-demand work. A node failure may credit you as described in the console.

7. Leaving
You may export your data and delete your account at any time from Account → Your data. We may close an account that breaks these terms, after notice except where the law or safety requires otherwise.

8. Liability
To the extent the law allows, our liability for any claim is limited to what you paid us in the three months before it, and we are not liable for lost profits or data.

9. Changes
We may change these terms. A new version is shown to you at your next visit and applies once you accept it; if you do not accept it, you may stop using the service and delete your account.

10. Law and contact
These terms are governed by the law of [jurisdiction]. Contact: [address, e-mail]."""

TERMS_ZH = """1. 服务
[运营方名称]（“我们”）通过本控制台及其 API 提供 GPU 算力租用服务（实例、集群、存储卷、一键应用部署）。本条款适用于所有账户，包括个人账户和团队账户。

2. 您的账户
您应提供可用的电子邮箱（以及依法要求时的手机号码和实名认证信息），妥善保管密码、第二验证因素和 API 令牌，并对使用上述凭据进行的操作负责。如发现账户被盗用，请立即告知我们。

3. 合理使用
您不得利用本服务从事违法活动、攻击或扫描其他系统、发送垃圾信息、未经我们书面同意挖矿、存放在我们运营地违法的内容，或规避配额、限制及“每人一次试用”的规则。对危害服务或他人的实例，我们可以停止其运行，并告知原因。

4. 价格、余额与计费
价格在创建实例前于控制台中显示。算力按秒从预付余额中扣费；存储在存在期间持续计费。余额用尽时，运行中的实例将被停止，其磁盘保留一段时间。试用金不可提现，并会过期。充值可按计费页面说明申请退款。已付款项可申请开具发票。

5. 您的数据
您存放在实例和存储卷中的数据归您所有；除为维持服务运行或依法要求外，我们不会查看。释放实例或删除存储卷会永久销毁其中数据，请自行备份。个人信息的处理方式见《隐私政策》。

6. 可用性
我们尽力保持服务可用，但不保证永不中断。可抢占实例可能随时因按需任务而被停止。节点故障时，可能按控制台所述给予补偿。

7. 离开
您可随时在“账户 → 您的数据”中导出数据并注销账户。对违反本条款的账户，我们可在通知后关闭，法律或安全另有要求的除外。

8. 责任限制
在法律允许的范围内，我们对任何索赔的责任以索赔前三个月内您向我们支付的金额为限，且不对利润损失或数据损失承担责任。

9. 变更
我们可能修改本条款。新版本将在您下次访问时展示，经您同意后生效；如不同意，您可停止使用本服务并注销账户。

10. 法律与联系方式
本条款适用[司法管辖地]法律。联系方式：[地址、邮箱]。"""

PRIVACY_EN = """1. Who we are
[Operator name, address] is responsible for the personal data described here. Contact: [privacy e-mail].

2. What we collect
- Account data: your e-mail address, display name, password (stored only as a hash), language, and, where the law requires, your mobile number and the result of real-name verification (a verified flag, the provider's reference and a masked name, never the full ID number).
- Credentials: SSH public keys, API token prefixes (tokens are stored only as a hash), second factors.
- Usage and billing: the instances, volumes and deployments you create and their history; top-ups, charges and invoices (including the invoice title and tax number you give).
- Security records: log-ins and credential changes with their IP address and browser, kept so you and we can spot misuse.
- Acceptances: which version of these documents you accepted, when, and from which IP address.

3. Why we use it
To provide the service you asked for (contract), to bill you and keep accounts (legal obligation), to keep the service and your account secure (legitimate interest), and to tell you about your resources and balance. We do not sell personal data, and we do not use the data on your instances.

4. Who receives it
Payment providers (for top-ups and refunds), SMS and e-mail providers (for codes and notices), the real-name verification provider where required, and authorities when the law requires it. [List processors and countries.] Data is stored in [region].

5. How long we keep it
Account data until you delete your account. Security records for [12] months. Billing records and invoices for as long as tax and accounting law requires (in China, generally at least [10] years), without your name or address after you delete your account.

6. Your rights
You may see, correct, export and delete your personal data, and withdraw consent. Export your data and delete your account from Account → Your data; deletion happens after a warning period in which you can cancel. For anything else, write to [privacy e-mail]. You may also complain to the data protection authority.

7. Security
Passwords and tokens are stored as hashes, staff need a second factor, connections are encrypted, and each account's machines are isolated from others'.

8. Changes
A new version of this policy is shown to you at your next visit, with what changed."""

PRIVACY_ZH = """1. 我们是谁
[运营方名称、地址] 是本政策所述个人信息的处理者。联系方式：[隐私邮箱]。

2. 我们收集的信息
- 账户信息：电子邮箱、显示名称、密码（仅保存其哈希值）、语言；依法要求时，还包括手机号码和实名认证结果（是否通过、服务商的业务编号和脱敏姓名，不保存完整身份证号）。
- 凭据：SSH 公钥、API 令牌前缀（令牌本身仅保存哈希值）、第二验证因素。
- 使用与计费：您创建的实例、存储卷、应用部署及其历史；充值、扣费和发票（含您填写的发票抬头和税号）。
- 安全记录：登录和凭据变更及其 IP 地址和浏览器，用于帮助您和我们发现异常。
- 同意记录：您同意的本文件版本、时间和 IP 地址。

3. 使用目的
为您提供所请求的服务（合同履行）、计费和记账（法定义务）、保障服务和账户安全（正当利益），以及向您通知资源和余额情况。我们不出售个人信息，也不使用您实例中的数据。

4. 信息接收方
支付机构（充值和退款）、短信和邮件服务商（验证码和通知）、依法要求时的实名认证服务商，以及依法要求时的有关机关。[列出受托处理方及所在国家/地区。] 数据存储于 [地区]。

5. 保存期限
账户信息保存至您注销账户。安全记录保存 [12] 个月。计费记录和发票按税务和会计法规要求的期限保存（在中国一般不少于 [10] 年），您注销账户后不再包含您的姓名或地址。

6. 您的权利
您可以查阅、更正、导出和删除您的个人信息，并撤回同意。在“账户 → 您的数据”中可导出数据和注销账户；注销在一段可撤销的等待期后执行。其他请求请发送至 [隐私邮箱]。您也可以向个人信息保护监管部门投诉。

7. 安全措施
密码和令牌以哈希值保存，工作人员须使用第二验证因素，连接经过加密，各账户的机器相互隔离。

8. 变更
本政策的新版本将在您下次访问时展示，并说明变更内容。"""


def seed(apps, schema_editor):
    DocumentVersion = apps.get_model("privacy", "DocumentVersion")
    now = timezone.now()
    for kind, title_en, title_zh, body_en, body_zh in (
        ("terms", "Terms of service", "服务条款", TERMS_EN, TERMS_ZH),
        ("privacy", "Privacy policy", "隐私政策", PRIVACY_EN, PRIVACY_ZH),
    ):
        DocumentVersion.objects.get_or_create(
            kind=kind,
            version=1,
            defaults={
                "title_en": title_en,
                "title_zh": title_zh,
                "body_en": NOTE_EN + body_en,
                "body_zh": NOTE_ZH + body_zh,
                "published_at": now,
            },
        )


class Migration(migrations.Migration):
    dependencies = [("privacy", "0001_legal_texts_exports_deletions")]

    operations = [migrations.RunPython(seed, migrations.RunPython.noop)]
