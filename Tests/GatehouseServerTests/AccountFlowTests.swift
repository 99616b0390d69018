import AsyncHTTPClient
import Foundation
import GatehouseServer
import Testing

@Suite("Accounts: sign-up, codes, magic links, passwords")
struct AccountFlowTests {
    @Test("sign up, read the mailed code, verify, then sign in by password and read the user")
    func signUpVerifyPassword() async throws {
        try await AccountHarness.with { h in
            let email = AccountHarness.newEmail()
            let signUp = try await h.client.signUp(
                "  \(email.uppercased()) ", password: "correct horse battery", data: ["first_name": "Ada"])
            #expect(signUp.status == 200)
            #expect(signUp.json["email"] as? String == email)
            #expect(signUp.json["access_token"] == nil)
            #expect((signUp.json["user_metadata"] as? [String: Any])?["first_name"] as? String == "Ada")

            // Unconfirmed: password sign-in is refused until the code is used.
            let early = try await h.client.password(email, "correct horse battery")
            #expect(early.status == 400)
            #expect(early.json["error_code"] as? String == "email_not_confirmed")

            let mail = try await h.mail(to: email, subject: "Confirm your email")
            let code = try #require(mail.code)
            let verified = try await h.client.verify(email, code: code, type: "signup")
            #expect(verified.status == 200)
            #expect(verified.json["token_type"] as? String == "bearer")
            #expect(verified.json["expires_in"] as? Int == 900)
            let session = try SignedIn(verified)
            let user = try await h.client.user(session.access)
            #expect(user.status == 200)
            #expect(user.json["email"] as? String == email)
            #expect(user.json["email_confirmed_at"] is String)
            // ISO 8601 with fractional seconds and the UTC designator, as Supabase clients parse it.
            let created = try #require(user.json["created_at"] as? String)
            #expect(created.wholeMatch(of: /\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z/) != nil, "\(created)")
            #expect((user.json["identities"] as? [[String: Any]])?.first?["provider"] as? String == "email")

            let signIn = try await h.client.password(email, "correct horse battery")
            #expect(signIn.status == 200)
            #expect(try SignedIn(signIn).userID == session.userID)
        }
    }

    @Test("signing up with a taken address answers exactly like a new one, and warns the owner by mail")
    func noEnumerationOnSignUp() async throws {
        try await AccountHarness.with { h in
            let taken = AccountHarness.newEmail("taken")
            _ = try await h.confirmedAccount(taken)
            let fresh = AccountHarness.newEmail("fresh")
            h.clock.advance(by: 61)  // past the resend cooldown of the first sign-up
            let again = try await h.client.signUp(taken, password: "another password 1")
            let new = try await h.client.signUp(fresh, password: "another password 1")
            #expect(again.status == new.status)
            #expect(Set(again.json.keys) == Set(new.json.keys))
            #expect((again.json["identities"] as? [Any])?.count == (new.json["identities"] as? [Any])?.count)
            #expect(again.json["email_confirmed_at"] == nil && new.json["email_confirmed_at"] == nil)
            #expect(again.json["confirmation_sent_at"] is String && new.json["confirmation_sent_at"] is String)
            let warning = try await h.mail(to: taken, subject: "Someone tried to sign up")
            #expect(warning.code == nil)
            // The real account is untouched: its password still works.
            #expect(try await h.client.password(taken, "correct horse battery").status == 200)
        }
    }

    @Test("magic link: the page's button answers 303 to the allowed redirect with the session in the fragment")
    func magicLink() async throws {
        try await AccountHarness.with({ $0.auth.redirectAllowList = ["myapp://login-callback"] }) { h in
            let email = AccountHarness.newEmail()
            #expect(try await h.client.otp(email).status == 200)
            let mail = try await h.mail(to: email, subject: "Your sign-in code")
            var link = try #require(mail.link)
            link =
                link.replacingOccurrences(of: "redirect_to=", with: "ignored=")
                + "&redirect_to=myapp%3A%2F%2Flogin-callback"
            let (page, reply) = try await h.followLink(link)
            #expect(page.status == 200)
            #expect(page.headers["content-type"]?.hasPrefix("text/html") == true)
            #expect(reply.status == 303)
            let location = try #require(reply.headers["location"])
            #expect(location.hasPrefix("myapp://login-callback#access_token="))
            let fragment = URLComponents(string: "x:?" + (location.split(separator: "#").last.map(String.init) ?? ""))
            let access = try #require(fragment?.queryItems?.first { $0.name == "access_token" }?.value)
            #expect(fragment?.queryItems?.first { $0.name == "refresh_token" }?.value?.isEmpty == false)
            #expect(try await h.client.user(access).status == 200)
            // The link is single use: its page now says it was used, and its button lands with an error.
            let (expiredPage, replay) = try await h.followLink(link)
            #expect(expiredPage.body.contains("This link was already used"))
            #expect(replay.status == 400 || replay.headers["location"]?.contains("error_code=otp_expired") == true)
        }
    }

    @Test("a redirect outside the allow-list falls back to the site URL")
    func redirectAllowList() async throws {
        try await AccountHarness.with({ $0.auth.siteURL = "https://app.example.com" }) { h in
            let email = AccountHarness.newEmail()
            _ = try await h.client.otp(email)
            let link = try #require(try await h.mail(to: email, subject: "Your sign-in code").link)
            let evil =
                link.replacingOccurrences(of: "redirect_to=", with: "ignored=")
                + "&redirect_to=https%3A%2F%2Fevil.example"
            let (_, reply) = try await h.followLink(evil)
            #expect(reply.status == 303)
            #expect(reply.headers["location"]?.hasPrefix("https://app.example.com#access_token=") == true)
        }
    }

    @Test("codes are single use, bound to their purpose, void after five wrong tries, and expire after ten minutes")
    func codeRules() async throws {
        try await AccountHarness.with { h in
            // Replay.
            let a = AccountHarness.newEmail("replay")
            _ = try await h.client.otp(a)
            let codeA = try #require(try await h.mail(to: a, subject: "Your sign-in code").code)
            #expect(try await h.client.verify(a, code: codeA, type: "email").status == 200)
            let replay = try await h.client.verify(a, code: codeA, type: "email")
            #expect(replay.status == 403)
            #expect(replay.json["error_code"] as? String == "otp_expired")

            // Wrong purpose: a sign-in code is not a recovery code.
            let b = AccountHarness.newEmail("purpose")
            _ = try await h.client.otp(b)
            let codeB = try #require(try await h.mail(to: b, subject: "Your sign-in code").code)
            #expect(try await h.client.verify(b, code: codeB, type: "recovery").status == 403)
            #expect(try await h.client.verify(b, code: codeB, type: "magiclink").status == 200)

            // Five wrong tries void the code: the sixth attempt fails even with the right code.
            let c = AccountHarness.newEmail("tries")
            _ = try await h.client.otp(c)
            let codeC = try #require(try await h.mail(to: c, subject: "Your sign-in code").code)
            let wrong = codeC == "000000" ? "111111" : "000000"
            for _ in 0..<5 { #expect(try await h.client.verify(c, code: wrong, type: "email").status == 403) }
            #expect(try await h.client.verify(c, code: codeC, type: "email").status == 403)

            // Expiry, on the server's clock.
            let d = AccountHarness.newEmail("expiry")
            _ = try await h.client.otp(d)
            let codeD = try #require(try await h.mail(to: d, subject: "Your sign-in code").code)
            h.clock.advance(by: 601)
            #expect(try await h.client.verify(d, code: codeD, type: "email").status == 403)
        }
    }

    @Test("wrong email and wrong password get the same answer")
    func invalidCredentials() async throws {
        try await AccountHarness.with { h in
            let email = AccountHarness.newEmail()
            _ = try await h.confirmedAccount(email)
            let wrongPassword = try await h.client.password(email, "not the password")
            let noAccount = try await h.client.password(AccountHarness.newEmail("nobody"), "not the password")
            for reply in [wrongPassword, noAccount] {
                #expect(reply.status == 400)
                #expect(reply.json["error_code"] as? String == "invalid_credentials")
                #expect(reply.json["msg"] as? String == "Invalid login credentials")
            }
        }
    }

    @Test(
        "weak passwords are refused with reasons; spaces, length and non-ASCII are kept as typed",
        arguments: [
            ("short", ["length"]), ("aaaaaaaaaaaa", ["repetitive"]), ("12345678", ["repetitive"]),
        ])
    func weakPasswords(password: String, reasons: [String]) async throws {
        try await AccountHarness.with { h in
            let reply = try await h.client.signUp(AccountHarness.newEmail(), password: password)
            #expect(reply.status == 422)
            #expect(reply.json["error_code"] as? String == "weak_password")
            let got = ((reply.json["weak_password"] as? [String: Any])?["reasons"] as? [String]) ?? []
            #expect(Set(reasons).isSubset(of: Set(got)))
        }
    }

    @Test("a password equal to the email is refused; edge-case passwords work exactly as typed")
    func passwordEdges() async throws {
        try await AccountHarness.with { h in
            let email = AccountHarness.newEmail()
            #expect(try await h.client.signUp(email, password: email).json["error_code"] as? String == "weak_password")
            let long = (0..<100).map { String(UnicodeScalar(UInt8(33 + ($0 * 7) % 90))) }.joined()
            for password in ["  spaced out pass  ", long, "pässwörd-ñ-密码-🔐"] {
                let address = AccountHarness.newEmail("edge")
                _ = try await h.confirmedAccount(address, password: password)
                #expect(try await h.client.password(address, password).status == 200)
                let trimmed = password.trimmingCharacters(in: .whitespaces)
                if trimmed != password { #expect(try await h.client.password(address, trimmed).status == 400) }
            }
        }
    }

    @Test("the resend cooldown holds for sixty seconds, for existing and unknown addresses alike")
    func resendCooldown() async throws {
        try await AccountHarness.with { h in
            for email in [AccountHarness.newEmail("known"), AccountHarness.newEmail("unknown")] {
                #expect(try await h.client.otp(email).status == 200)
                let again = try await h.client.otp(email)
                #expect(again.status == 429)
                #expect(again.json["error_code"] as? String == "over_email_send_rate_limit")
                #expect(Int(again.headers["retry-after"] ?? "") ?? 0 > 0)
                h.clock.advance(by: 61)
                #expect(try await h.client.otp(email).status == 200)
            }
        }
    }

    @Test("per-IP mail limit answers 429 with Retry-After")
    func perIPMailLimit() async throws {
        try await AccountHarness.with({ $0.auth.limits.emailsPerIP = RateLimit(limit: 3, per: 3600) }) { h in
            for _ in 0..<3 { #expect(try await h.client.otp(AccountHarness.newEmail()).status == 200) }
            let limited = try await h.client.otp(AccountHarness.newEmail())
            #expect(limited.status == 429)
            #expect(limited.json["error_code"] as? String == "over_email_send_rate_limit")
            #expect(limited.headers["retry-after"] != nil)
        }
    }

    @Test("failed passwords back off per account; spraying it never blocks the owner's mailed code")
    func passwordBackoff() async throws {
        try await AccountHarness.with { h in
            let email = AccountHarness.newEmail()
            _ = try await h.confirmedAccount(email)
            var sawBackoff = false
            for attempt in 0..<8 {
                var sprayer = h.client
                sprayer.headers = [("X-Forwarded-For", "192.0.2.\(attempt + 1)")]
                let reply = try await sprayer.password(email, "guess \(attempt)")
                if reply.status == 429 {
                    sawBackoff = true
                    #expect(reply.json["error_code"] as? String == "over_request_rate_limit")
                    #expect(Int(reply.headers["retry-after"] ?? "") ?? 0 >= 1)
                    break
                }
                #expect(reply.status == 400)
            }
            #expect(sawBackoff)
            // The right password waits too (backoff is per account)…
            #expect(try await h.client.password(email, "correct horse battery").status == 429)
            // …but a mailed code still signs the owner in.
            _ = try await h.client.otp(email)
            let code = try #require(try await h.mail(to: email, subject: "Your sign-in code").code)
            #expect(try await h.client.verify(email, code: code, type: "email").status == 200)
            // And once the backoff has passed, the password works and the count starts over.
            h.clock.advance(by: 3601)
            #expect(try await h.client.password(email, "correct horse battery").status == 200)
        }
    }

    @Test("the hourly ceiling: after 100 failures even waiting out the backoff is not enough within the hour")
    func failureCeiling() async throws {
        try await AccountHarness.with({ $0.auth.limits.failuresPerHour = 6 }) { h in
            let email = AccountHarness.newEmail()
            _ = try await h.confirmedAccount(email)
            var failures = 0
            while failures < 6 {
                let reply = try await h.client.password(email, "wrong \(failures)")
                if reply.status == 429 {
                    h.clock.advance(by: TimeInterval(Int(reply.headers["retry-after"] ?? "1") ?? 1))
                } else {
                    failures += 1
                }
            }
            h.clock.advance(by: 900)
            let capped = try await h.client.password(email, "correct horse battery")
            #expect(capped.status == 429)
            #expect(Int(capped.headers["retry-after"] ?? "") ?? 0 > 60)
        }
    }

    @Test("recovery: the mailed code signs in and allows a new password without the old one")
    func recovery() async throws {
        try await AccountHarness.with { h in
            let email = AccountHarness.newEmail()
            _ = try await h.confirmedAccount(email)
            #expect(try await h.client.post("/auth/v1/recover", ["email": email]).status == 200)
            #expect(
                try await h.client.post("/auth/v1/recover", ["email": AccountHarness.newEmail("none")]).status == 200)
            let code = try #require(try await h.mail(to: email, subject: "Reset your password").code)
            let session = try SignedIn(try await h.client.verify(email, code: code, type: "recovery"))
            #expect(
                try await h.client.put("/auth/v1/user", ["password": "brand new secret"], bearer: session.access).status
                    == 200)
            #expect(try await h.client.password(email, "brand new secret").status == 200)
            #expect(try await h.client.password(email, "correct horse battery").status == 400)
        }
    }

    @Test(
        "a password change within a day of sign-in needs nothing more, as GoTrue's secure password change; later it needs the current password or a code; other sessions end"
    )
    func updateUser() async throws {
        try await AccountHarness.with { h in
            let email = AccountHarness.newEmail()
            _ = try await h.confirmedAccount(email)
            let main = try SignedIn(try await h.client.password(email, "correct horse battery"))
            let other = try SignedIn(try await h.client.password(email, "correct horse battery"))
            // Right after sign-in (supabase-swift cannot send current_password): changed, profile merged.
            let fresh = try await h.client.put(
                "/auth/v1/user", ["password": "next password 1", "data": ["nickname": "ada"]], bearer: main.access)
            #expect(fresh.status == 200)
            #expect((fresh.json["user_metadata"] as? [String: Any])?["nickname"] as? String == "ada")
            #expect(try await h.client.user(other.access).status == 403)
            #expect(try await h.client.user(main.access).status == 200)
            #expect(try await h.client.password(email, "next password 1").status == 200)
            let same = try await h.client.put("/auth/v1/user", ["password": "next password 1"], bearer: main.access)
            #expect(same.status == 422 && same.json["error_code"] as? String == "same_password")

            // A day after the sign-in, refreshed or not: GoTrue's 400 reauthentication_needed.
            h.clock.advance(by: 86_400 + 1)
            let refreshed = try SignedIn(try await h.client.refresh(main.refresh))
            let missing = try await h.client.put(
                "/auth/v1/user", ["password": "next password 2"], bearer: refreshed.access)
            #expect(missing.status == 400)
            #expect(missing.json["error_code"] as? String == "reauthentication_needed")
            let wrong = try await h.client.put(
                "/auth/v1/user", ["password": "next password 2", "current_password": "nope nope"],
                bearer: refreshed.access)
            #expect(wrong.status == 400 && wrong.json["error_code"] as? String == "current_password_invalid")
            let badNonce = try await h.client.put(
                "/auth/v1/user", ["password": "next password 2", "nonce": "000000"], bearer: refreshed.access)
            #expect(badNonce.status == 422 && badNonce.json["error_code"] as? String == "reauthentication_not_valid")
            // A code from /auth/v1/reauthenticate does it.
            #expect(try await h.client.get("/auth/v1/reauthenticate", bearer: refreshed.access).status == 200)
            let nonce = try #require(try await h.mail(to: email, subject: "Confirm it is you").code)
            let byNonce = try await h.client.put(
                "/auth/v1/user", ["password": "next password 2", "nonce": nonce], bearer: refreshed.access)
            #expect(byNonce.status == 200)
            // So does the current password; a new sign-in starts a new day.
            let byPassword = try await h.client.put(
                "/auth/v1/user", ["password": "next password 3", "current_password": "next password 2"],
                bearer: refreshed.access)
            #expect(byPassword.status == 200)
            let again = try SignedIn(try await h.client.password(email, "next password 3"))
            #expect(
                try await h.client.put("/auth/v1/user", ["password": "next password 4"], bearer: again.access).status
                    == 200)
        }
    }

    @Test("--password-reauthentication 0 always asks (but for a fresh recovery link), off never does")
    func passwordReauthenticationSetting() async throws {
        try await AccountHarness.with({ $0.auth.passwordReauthenticationWindow = 0 }) { h in
            let email = AccountHarness.newEmail()
            let session = try await h.confirmedAccount(email)
            let refused = try await h.client.put(
                "/auth/v1/user", ["password": "next password 1"], bearer: session.access)
            #expect(refused.status == 400 && refused.json["error_code"] as? String == "reauthentication_needed")
            #expect(try await h.client.post("/auth/v1/recover", ["email": email]).status == 200)
            let code = try #require(try await h.mail(to: email, subject: "Reset your password").code)
            let recovery = try SignedIn(try await h.client.verify(email, code: code, type: "recovery"))
            #expect(
                try await h.client.put("/auth/v1/user", ["password": "next password 1"], bearer: recovery.access)
                    .status == 200)
        }
        try await AccountHarness.with({ $0.auth.passwordReauthenticationWindow = nil }) { h in
            let email = AccountHarness.newEmail()
            let session = try await h.confirmedAccount(email)
            h.clock.advance(by: 2 * 86_400)
            let refreshed = try SignedIn(try await h.client.refresh(session.refresh))
            #expect(
                try await h.client.put("/auth/v1/user", ["password": "next password 1"], bearer: refreshed.access)
                    .status == 200)
            // A password that is given is still checked.
            let wrong = try await h.client.put(
                "/auth/v1/user", ["password": "next password 2", "current_password": "nope nope"],
                bearer: refreshed.access)
            #expect(wrong.status == 400 && wrong.json["error_code"] as? String == "current_password_invalid")
        }
    }

    @Test(
        "secure email change: codes to both addresses, the first confirmation answers GoTrue's message, the second changes the address, signs in and tells the old one"
    )
    func emailChange() async throws {
        try await AccountHarness.with { h in
            let email = AccountHarness.newEmail("old")
            let session = try await h.confirmedAccount(email)
            let newEmail = AccountHarness.newEmail("new")
            // No re-authentication (GoTrue asks none): the current address must confirm instead.
            let asked = try await h.client.put("/auth/v1/user", ["email": newEmail], bearer: session.access)
            #expect(asked.status == 200)
            #expect(asked.json["email"] as? String == email)
            #expect(asked.json["new_email"] as? String == newEmail)
            #expect(asked.json["email_change_sent_at"] is String)
            let current = try await h.mail(to: email, subject: "Confirm the change of your email address")
            #expect(current.text.contains(newEmail))
            let currentCode = try #require(current.code)
            let newCode = try #require(try await h.mail(to: newEmail, subject: "Confirm your new email address").code)
            #expect(try await h.client.user(session.access).json["new_email"] as? String == newEmail)

            // The new address first: GoTrue's 200 and message, no session; the address has not changed.
            let first = try await h.client.verify(newEmail, code: newCode, type: "email_change")
            #expect(first.status == 200)
            #expect(first.json["code"] as? String == "200")
            #expect(
                first.json["msg"] as? String
                    == "Confirmation link accepted. Please proceed to confirm link sent to the other email")
            #expect(first.json["access_token"] == nil)
            #expect(try await h.client.user(session.access).json["email"] as? String == email)
            #expect(try await h.client.password(email, "correct horse battery").status == 200)
            // A code is used once.
            #expect(try await h.client.verify(newEmail, code: newCode, type: "email_change").status == 403)

            // Then the current address: changed, signed in, and the old address is told.
            let second = try await h.client.verify(email, code: currentCode, type: "email_change")
            #expect(second.status == 200)
            let user = try #require(second.json["user"] as? [String: Any])
            #expect(user["email"] as? String == newEmail)
            #expect(user["new_email"] == nil || user["new_email"] is NSNull)
            #expect(try await h.client.user(session.access).json["email"] as? String == newEmail)
            #expect(try await h.client.password(newEmail, "correct horse battery").status == 200)
            #expect(try await h.client.password(email, "correct horse battery").status == 400)
            let told = try await h.mail(to: email, subject: "Your email address was changed")
            #expect(told.text.contains(newEmail))
            #expect(told.code == nil)
        }
    }

    @Test(
        "an email change: a new request voids the earlier codes; resend mails both addresses again; a link confirms too"
    )
    func emailChangeResendAndLinks() async throws {
        try await AccountHarness.with { h in
            let email = AccountHarness.newEmail("old")
            let session = try await h.confirmedAccount(email)
            let dropped = AccountHarness.newEmail("dropped")
            #expect(try await h.client.put("/auth/v1/user", ["email": dropped], bearer: session.access).status == 200)
            let droppedCode = try #require(
                try await h.mail(to: dropped, subject: "Confirm your new email address").code)
            _ = try await h.mail(to: email, subject: "Confirm the change of your email address")
            h.clock.advance(by: 61)
            let newEmail = AccountHarness.newEmail("new")
            #expect(try await h.client.put("/auth/v1/user", ["email": newEmail], bearer: session.access).status == 200)
            #expect(try await h.client.verify(dropped, code: droppedCode, type: "email_change").status == 403)
            let firstRound = try #require(
                try await h.mail(to: email, subject: "Confirm the change of your email address").code)
            _ = try await h.mail(to: newEmail, subject: "Confirm your new email address")

            // Resend names the current address, as GoTrue's does; the first round's codes stop working.
            h.clock.advance(by: 61)
            #expect(try await h.client.post("/auth/v1/resend", ["type": "email_change", "email": email]).status == 200)
            let current = try await h.mail(to: email, subject: "Confirm the change of your email address")
            let fresh = try await h.mail(to: newEmail, subject: "Confirm your new email address")
            #expect(try await h.client.verify(email, code: firstRound, type: "email_change").status == 403)
            // An address with no change waiting gets the same answer, and no mail.
            let stranger = AccountHarness.newEmail("stranger")
            _ = try await h.confirmedAccount(stranger)
            #expect(
                try await h.client.post("/auth/v1/resend", ["type": "email_change", "email": stranger]).status == 200)
            #expect(try await h.hasMail(to: stranger, subject: "Confirm the change of your email address") == false)

            // Both by link (token_hash), as supabase-js's verifyOtp does it.
            func tokenHash(_ mail: ReceivedMail) throws -> String {
                let link = try #require(mail.link.flatMap(URLComponents.init(string:)))
                return try #require(link.queryItems?.first { $0.name == "token" }?.value)
            }
            let first = try await h.client.post(
                "/auth/v1/verify", ["type": "email_change", "token_hash": try tokenHash(fresh)])
            #expect(first.status == 200 && first.json["code"] as? String == "200")
            let second = try await h.client.post(
                "/auth/v1/verify", ["type": "email_change", "token_hash": try tokenHash(current)])
            #expect(second.status == 200)
            #expect((second.json["user"] as? [String: Any])?["email"] as? String == newEmail)
        }
    }

    @Test("--secure-email-change off: the new address alone confirms, and asking needs re-authentication after a day")
    func emailChangeSingleConfirmation() async throws {
        try await AccountHarness.with({ $0.auth.secureEmailChange = false }) { h in
            let email = AccountHarness.newEmail("old")
            let session = try await h.confirmedAccount(email)
            let newEmail = AccountHarness.newEmail("new")
            #expect(try await h.client.put("/auth/v1/user", ["email": newEmail], bearer: session.access).status == 200)
            let notice = try await h.mail(to: email, subject: "Your email address is being changed")
            #expect(notice.code == nil)
            let code = try #require(try await h.mail(to: newEmail, subject: "Confirm your new email address").code)
            let done = try await h.client.verify(newEmail, code: code, type: "email_change")
            #expect((done.json["user"] as? [String: Any])?["email"] as? String == newEmail)
            h.clock.advance(by: 86_401)
            let later = try SignedIn(try await h.client.refresh(session.refresh))
            let refused = try await h.client.put(
                "/auth/v1/user", ["email": AccountHarness.newEmail("next")], bearer: later.access)
            #expect(refused.status == 400 && refused.json["error_code"] as? String == "reauthentication_needed")
        }
    }

    @Test(
        "--reveal-accounts on answers as GoTrue: a confirmed address's sign-up has no identities, create_user false for an unknown one is 422 otp_disabled; off, both answer as for any address"
    )
    func revealAccounts() async throws {
        for reveal in [false, true] {
            try await AccountHarness.with({ $0.auth.revealAccounts = reveal }) { h in
                let taken = AccountHarness.newEmail("taken")
                _ = try await h.confirmedAccount(taken)
                h.clock.advance(by: 61)
                let again = try await h.client.signUp(taken, password: "another passphrase 1")
                #expect(again.status == 200)
                #expect((again.json["identities"] as? [Any])?.isEmpty == reveal)
                let fresh = try await h.client.signUp(
                    AccountHarness.newEmail("fresh"), password: "another passphrase 1")
                #expect((fresh.json["identities"] as? [Any])?.count == 1)
                let unknown = try await h.client.otp(AccountHarness.newEmail("unknown"), createUser: false)
                #expect(unknown.status == (reveal ? 422 : 200))
                #expect(unknown.json["error_code"] as? String == (reveal ? "otp_disabled" : nil))
                #expect(try await h.client.otp(taken, createUser: false).status == 200)
            }
        }
    }

    @Test("both error formats: legacy by default, {code, message} with X-Supabase-Api-Version echoed")
    func errorFormats() async throws {
        try await AccountHarness.with { h in
            let legacy = try await h.client.password(AccountHarness.newEmail(), "whatever pass")
            #expect(legacy.json["code"] as? Int == 400)
            #expect(legacy.json["error_code"] as? String == "invalid_credentials")
            let modern = try await h.client.post(
                "/auth/v1/token?grant_type=password",
                ["email": AccountHarness.newEmail(), "password": "whatever pass"],
                extra: [("X-Supabase-Api-Version", "2024-01-01"), ("apikey", "anything")])
            #expect(modern.json["code"] as? String == "invalid_credentials")
            #expect(modern.json["message"] as? String == "Invalid login credentials")
            #expect(modern.headers["x-supabase-api-version"] == "2024-01-01")
            let invalid = try await h.client.signUp("not-an-email")
            #expect(invalid.status == 400)
            #expect(invalid.json["error_code"] as? String == "validation_failed")
            let grant = try await h.client.post("/auth/v1/token?grant_type=magic", [:])
            #expect(grant.json["error_code"] as? String == "unsupported_grant_type")
        }
    }

    @Test("settings and the JWKS are public")
    func publicEndpoints() async throws {
        try await AccountHarness.with { h in
            let settings = try await h.client.get("/auth/v1/settings")
            #expect((settings.json["external"] as? [String: Any])?["email"] as? Bool == true)
            let jwks = try await h.client.get("/auth/v1/.well-known/jwks.json")
            let keys = try #require(jwks.json["keys"] as? [[String: Any]])
            #expect(keys.count == 1)
            #expect(keys.first?["kty"] as? String == "EC")
            #expect(keys.first?["crv"] as? String == "P-256")
            #expect(keys.first?["d"] == nil)
        }
    }
}
