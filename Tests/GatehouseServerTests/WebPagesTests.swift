import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Testing

@testable import GatehouseServer

@Suite("Web pages: the rules behind them")
struct WebPageRulesTests {
    @Test("a link page's form may post here and to the app its button redirects to, never to anything injected")
    func formTargets() {
        #expect(SecurityHeaders.pagePolicy(formTargets: []).contains("form-action 'self';"))
        #expect(
            SecurityHeaders.pagePolicy(formTargets: ["myapp://login-callback"]).contains("form-action 'self' myapp:;"))
        #expect(
            SecurityHeaders.pagePolicy(formTargets: ["https://app.example.com:8443/auth?x=1"])
                .contains("form-action 'self' https://app.example.com:8443;"))
        for hostile in ["javascript:alert(1)", "data:text/html,x", "https://a.example;script-src *", "my app://x"] {
            #expect(SecurityHeaders.pagePolicy(formTargets: [hostile]).contains("form-action 'self';"), "\(hostile)")
        }
        #expect(!SecurityHeaders.pagePolicy(formTargets: []).contains("script-src"))
    }

    @Test("the six digits a link's page shows are the link's own, and say nothing of its token")
    func linkedCodes() {
        let tokens = (0..<200).map { _ in Secrets.token() }
        let codes = tokens.map { Secrets.sixDigitCode(linkedTo: $0) }
        #expect(codes.allSatisfy { $0.count == 6 && $0.allSatisfy(\.isASCII) && $0.allSatisfy(\.isNumber) })
        #expect(tokens.map { Secrets.sixDigitCode(linkedTo: $0) } == codes)
        #expect(Set(codes).count >= 190)
    }

    @Test("the web session's cookies: HttpOnly and SameSite=Strict, Secure over https, read back by name")
    func cookies() {
        let session = WebSession(secure: true)
        let cleared = session.clearing
        #expect(cleared.allSatisfy { $0.contains("HttpOnly; SameSite=Strict; Secure; Max-Age=0") })
        #expect(!WebSession(secure: false).clearing.contains { $0.contains("Secure") })
        let headers: HTTPFields = [.cookie: "theme=dark; gh_session=abc.def; gh_refresh="]
        #expect(WebSession.read("gh_session", from: headers) == "abc.def")
        #expect(WebSession.read("gh_refresh", from: headers) == nil)
        #expect(WebSession.read("missing", from: headers) == nil)
    }

    @Test(
        "sessions are named by browser and system",
        arguments: [
            (
                "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/156.0 Safari/537.36",
                "Chrome on Linux"
            ),
            (
                "Mozilla/5.0 (iPhone; CPU iPhone OS 18_0 like Mac OS X) AppleWebKit/605.1.15 Version/18.0 Mobile Safari/604.1",
                "Safari on iPhone"
            ),
            ("Seeds/3 CFNetwork/1498 Darwin/23.0.0", "App"),
            ("", "Unknown device"),
        ])
    func devices(agent: String, name: String) {
        #expect(PageKit.device(agent) == name)
    }
}

@Suite("Web pages through the router")
struct WebPageRouterTests {
    func withApp(
        templates: String? = nil, clock: any GatehouseClock = SystemClock(),
        _ test: @escaping @Sendable (any TestClientProtocol) async throws -> Void
    ) async throws {
        try await withRouterApp(clock: clock, { $0.templatesDirectory = templates }, test)
    }

    @Test("without a session the account pages send to sign-in; the sign-in page is HTML under the page policy")
    func signedOut() async throws {
        try await withApp { client in
            for path in ["/account", "/account/password"] {
                try await client.execute(uri: path, method: .get) { response in
                    #expect(response.status == .seeOther, "\(path)")
                    #expect(response.headers[.location] == "/account/sign-in", "\(path)")
                }
            }
            try await client.execute(uri: "/account/sign-in", method: .get) { response in
                #expect(response.status == .ok)
                #expect(response.headers[.contentType]?.hasPrefix("text/html") == true)
                #expect(response.headers[SecurityHeaders.contentSecurityPolicy]?.contains("default-src 'none'") == true)
                let page = String(buffer: response.body)
                #expect(page.contains("data-page=\"sign-in\"") && page.contains("<html lang=\"en\">"))
                #expect(!page.contains("<script"))
            }
        }
    }

    @Test("a form posted from another site is refused before anything is tried")
    func crossSite() async throws {
        try await withApp { client in
            try await client.execute(
                uri: "/account/sign-in", method: .post,
                headers: [.contentType: "application/x-www-form-urlencoded", .origin: "https://evil.example"],
                body: ByteBuffer(string: "email=a%40example.com&password=guess")
            ) { response in
                #expect(response.status == .forbidden)
                #expect(String(buffer: response.body).contains("data-page=\"refused\""))
            }
        }
    }

    @Test("an unknown link and an unknown share token get pages that say so; HEAD answers as GET, without the body")
    func unknownLinks() async throws {
        try await withApp { client in
            try await client.execute(uri: "/auth/v1/verify?token=nope&type=magiclink", method: .get) { response in
                #expect(response.status == .ok)
                #expect(String(buffer: response.body).contains("data-page=\"expired\""))
            }
            try await client.execute(uri: "/auth/v1/verify?token=nope&type=magiclink", method: .head) { response in
                #expect(response.status == .ok)
                #expect(response.body.readableBytes == 0)
            }
            try await client.execute(uri: "/share/nope", method: .get) { response in
                #expect(response.status == .gone)
                #expect(String(buffer: response.body).contains("data-page=\"share-unavailable\""))
            }
        }
    }

    @Test("a limit, a missing page and an unreadable form answer pages with the API's status; the API keeps its JSON")
    func failuresArePages() async throws {
        // A stopped clock: on a loaded machine the limit's bucket would refill while the 31 requests go.
        try await withApp(clock: TestClock()) { client in
            // Share lookups are secret checks, 30 per 5 minutes per address: the 31st gets the limit's page.
            for _ in 0..<30 {
                try await client.execute(uri: "/share/nope", method: .get) { #expect($0.status == .gone) }
            }
            try await client.execute(uri: "/share/nope", method: .get) { response in
                #expect(response.status == .tooManyRequests)
                #expect(response.headers[.contentType]?.hasPrefix("text/html") == true)
                #expect(response.headers[.retryAfter].flatMap(Int.init).map { $0 > 0 } == true)
                let page = String(buffer: response.body)
                #expect(page.contains("data-page=\"error\"") && page.contains("Too many attempts"))
            }
            try await client.execute(uri: "/account/nowhere", method: .get) { response in
                #expect(response.status == .notFound)
                #expect(String(buffer: response.body).contains("data-page=\"error\""))
            }
            try await client.execute(
                uri: "/account/sign-in", method: .post,
                headers: [.contentType: "application/x-www-form-urlencoded"], body: ByteBuffer(string: "email=a")
            ) { response in
                #expect(response.status == .badRequest)
                #expect(response.headers[.contentType]?.hasPrefix("text/html") == true)
            }
            try await client.execute(uri: "/v1/account/audit", method: .get) { response in
                #expect(response.status == .unauthorized)
                #expect(response.headers[.contentType]?.hasPrefix("application/json") == true)
            }
        }
    }

    @Test("a page template in --templates-dir replaces the built-in one; the others stay")
    func overriddenPage() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pages-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        try FileManager.default.createDirectory(
            at: folder.appendingPathComponent("pages"), withIntermediateDirectories: true)
        try "{{> head}}<h1>Welcome to Acme</h1>{{> foot}}".write(
            to: folder.appendingPathComponent("pages/sign-in.mustache"), atomically: true, encoding: .utf8)
        try await withApp(templates: folder.path) { client in
            try await client.execute(uri: "/account/sign-in", method: .get) { response in
                let page = String(buffer: response.body)
                #expect(page.contains("<h1>Welcome to Acme</h1>"))
                #expect(page.contains("data-page=\"sign-in\""))
            }
            try await client.execute(uri: "/share/nope", method: .get) { response in
                #expect(String(buffer: response.body).contains("This invitation no longer works"))
            }
        }
    }
}
